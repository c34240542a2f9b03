"""The API reads JSON only, and refuses as malformed what PostgreSQL or the JSON
renderer could not take back: a body nested too deeply for the parser, a lone UTF-16
surrogate in a string (not Unicode: it cannot be encoded), a number too large for a
finite float (1e400 parses as infinity, which JSON cannot carry)."""

from __future__ import annotations

from typing import Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError

from runs.userinput import json_problem


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
    """Why `data` (parsed JSON) cannot be stored or rendered again, or None (the pages'
    rule, runs/userinput.py; a NUL character is refused by the serializers instead, beside
    its field, and the parser's own nesting limit is the only one)."""
    return json_problem(data, nul=False, max_depth=None)
