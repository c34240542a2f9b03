"""The API reads JSON only, and refuses as malformed what PostgreSQL or the JSON
renderer could not take back: a body nested too deeply for the parser, a lone UTF-16
surrogate in a string (not Unicode: it cannot be encoded), a number too large for a
finite float (1e400 parses as infinity, which JSON cannot carry)."""

from __future__ import annotations

import math
from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError


class JSONParser(parsers.JSONParser):
    def parse(self, stream: Any, media_type: Any = None, parser_context: Any = None) -> Any:
        try:
            data = super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - the document is nested too deeply") from None
        problem = unrepresentable(data)
        if problem:
            raise ParseError(f"JSON parse error - {problem}")
        return data


def unrepresentable(data: Any) -> str | None:
    """Why `data` (parsed JSON) cannot be stored or rendered again, or None. Iterative:
    the parser's own nesting limit is the only one."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if not _is_unicode(value):
                return "a string holds a lone surrogate (not valid Unicode)"
        elif isinstance(value, float):
            if not math.isfinite(value):
                return "a number is too large to represent"
        elif isinstance(value, dict):
            for key, item in value.items():
                if not _is_unicode(key):
                    return "a key holds a lone surrogate (not valid Unicode)"
                stack.append(item)
        elif isinstance(value, list):
            stack.extend(value)
    return None


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
