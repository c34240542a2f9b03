"""Words for a sentence a person reads (a page's title, a timeline label, a refusal's
message): shortened text and JSON, plurals, statuses. The pages' timeline and the
reconciliation services say values the same way."""

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


def plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def word(status: str) -> str:
    return status.replace("_", " ")
