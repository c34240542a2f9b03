"""Words for the titles and labels: shortened text and JSON, plurals, statuses."""

from __future__ import annotations

from runs.words import json_short, short

__all__ = ["json_short", "plural", "short", "word"]


def plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def word(status: str) -> str:
    return status.replace("_", " ")
