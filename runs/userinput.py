"""Text and JSON that people type into the pages, checked before anything uses them: the
pages answer what is wrong beside the field (400 for a filter, 422 for a form), as the
API answers 400, instead of failing on what PostgreSQL cannot store (a NUL character)
or Python cannot represent (a date past the calendar's end, a number JSON cannot
carry, a document nested deeper than the parser goes)."""

from __future__ import annotations

import json
import math
import re
from datetime import date, datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_date, parse_datetime

# Deeper than any result or payload a person types; the JSON parser's own limit is
# about 1,000 and ends in a RecursionError.
MAX_JSON_DEPTH = 64


class BadInput(ValueError):
    """What is wrong with one input, in words for the person who typed it."""


def clean_text(value: str | None, what: str) -> str:
    """`value` stripped; refused if it holds a NUL character, which PostgreSQL cannot
    store (the API refuses it too, and its schema says so)."""
    text = (value or "").strip()
    if "\x00" in text:
        raise BadInput(f"{what} contains a NUL character, which cannot be stored")
    return text


def json_problem(
    data: Any, *, nul: bool = True, max_depth: int | None = MAX_JSON_DEPTH
) -> str | None:
    """Why `data` (parsed JSON) cannot be stored or rendered again, or None: a lone
    UTF-16 surrogate, a number too large for a finite float, and unless told otherwise
    a NUL character (PostgreSQL's jsonb refuses \\u0000) and nesting deeper than
    `max_depth`. Iterative."""
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        value, depth = stack.pop()
        if max_depth is not None and depth > max_depth:
            return f"it is nested too deeply (more than {max_depth} levels)"
        if isinstance(value, str):
            problem = _string_problem(value, "a string", nul)
            if problem:
                return problem
        elif isinstance(value, float):
            if not math.isfinite(value):
                return "a number is too large to represent"
        elif isinstance(value, dict):
            for key, item in value.items():
                problem = _string_problem(key, "a key", nul) if isinstance(key, str) else None
                if problem:
                    return problem
                stack.append((item, depth + 1))
        elif isinstance(value, list):
            stack.extend((item, depth + 1) for item in value)
    return None


def _string_problem(text: str, what: str, nul: bool) -> str | None:
    if nul and "\x00" in text:
        return f"{what} holds a NUL character (\\u0000), which cannot be stored"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return f"{what} holds a lone surrogate (not valid Unicode)"
    return None


def parse_json(text: str | None, what: str) -> Any:
    """JSON typed into a form: empty is None; invalid JSON, NaN and Infinity, and what
    json_problem() refuses raise BadInput saying where or why."""
    if text is None or not text.strip():
        return None

    def not_json(constant: str) -> Any:
        raise ValueError(f"{constant} is not a JSON value")

    try:
        data = json.loads(text, parse_constant=not_json)
    except json.JSONDecodeError as exc:
        raise BadInput(
            f"{what} is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
        ) from exc
    except RecursionError:
        raise BadInput(f"{what} is not usable: it is nested too deeply") from None
    except ValueError as exc:
        raise BadInput(f"{what} is not valid JSON: {exc}") from exc
    problem = json_problem(data)
    if problem:
        raise BadInput(f"{what} is not usable: {problem}")
    return data


def parse_day(value: str | None, what: str) -> date | None:
    """A day (YYYY-MM-DD), or None when empty; one that does not exist, or is the
    calendar's last (nothing could be `until` it), is refused."""
    text = clean_text(value, what)
    if not text:
        return None
    try:
        day = parse_date(text)
    except ValueError as exc:  # well formed, but no such day (2024-02-30)
        raise BadInput(f"{text!r} is not a day that exists ({exc})") from exc
    if day is None:
        raise BadInput(f"{text!r} is not a date (YYYY-MM-DD)")
    if day >= date.max:
        raise BadInput(f"{text!r} is past the last day this page can count to")
    return day


DAY_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")
TO_THE_MINUTE = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def parse_moment(value: str | None, what: str, *, end: bool) -> datetime | None:
    """A date or a date and time, in the site's time zone; None when empty. With `end`
    (an "until" filter) the whole of what was typed is included: a day up to the next
    day's start, a minute (what a datetime-local field sends) up to the next minute's."""
    text = clean_text(value, what)
    if not text:
        return None
    if DAY_ONLY.fullmatch(text):
        day = parse_day(text, what)
        assert day is not None
        moment = datetime.combine(day, datetime.min.time())
        if end:
            moment += timedelta(days=1)
    else:
        try:
            parsed = parse_datetime(text)
        except ValueError as exc:
            raise BadInput(f"{text!r} is not a date and time that exists ({exc})") from exc
        if parsed is None:
            raise BadInput(f"{text!r} is not a date or a date and time (YYYY-MM-DD[THH:MM])")
        moment = parsed
        if end and TO_THE_MINUTE.fullmatch(text):
            try:
                moment += timedelta(minutes=1)
            except OverflowError as exc:
                raise BadInput(f"{text!r} is past the last moment this page can count to") from exc
    try:
        return timezone.make_aware(moment) if timezone.is_naive(moment) else moment
    except (OverflowError, ValueError) as exc:
        raise BadInput(f"{text!r} is out of range") from exc
