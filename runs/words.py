"""Text and JSON shortened for a sentence a person reads (a page's title, a refusal's
message): the pages' timeline and the reconciliation services say values the same way."""

from __future__ import annotations

import json
from typing import Any


def short(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


def json_short(value: Any, chars: int = 240) -> str:
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return short(text, chars)
