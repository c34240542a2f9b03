"""Times and durations for people, one way everywhere: the run page's timeline, the
template tags and the queue's wording all format with these."""

from __future__ import annotations

from datetime import datetime, timedelta

from django.utils import timezone


# --- times ---------------------------------------------------------------------------
def absolute(t: datetime) -> str:
    """`2025-01-31 12:00:03.512 UTC`: milliseconds matter on a two-second run."""
    local = timezone.localtime(t)
    return f"{local:%Y-%m-%d %H:%M:%S}.{local.microsecond // 1000:03d} {local.tzname() or ''}"


def to_the_second(t: datetime) -> str:
    """`2025-01-31 12:00:03 UTC`: the title of a relative time, where a second is enough."""
    return timezone.localtime(t).strftime("%Y-%m-%d %H:%M:%S %Z")


def trimmed(value: float, decimals: int) -> str:
    return f"{value:.{decimals}f}".rstrip("0").rstrip(".")


def compound(seconds: float, *, parts: int = 4) -> str:
    """`1 d 2 h`, `1 min 30 s`: whole units, largest first, zeros left out."""
    total = round(seconds)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    words = [
        f"{n} {unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "min"), (secs, "s")) if n
    ]
    return " ".join(words[:parts]) or "0 s"


def duration_text(seconds: float) -> str:
    """A duration for people: `12 ms`, `2.35 s`, `12.3 s`, `4 min 5 s`, `1 d 2 h`."""
    seconds = max(seconds, 0.0)
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{trimmed(seconds, 2 if seconds < 10 else 1)} s"
    return compound(seconds, parts=2)


def elapsed_text(seconds: float) -> str:
    """How long something took, as the lists show it: `12 ms`, `4.2 s`, `3 min`, `2 h 5 min`."""
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    return span_text(timedelta(seconds=seconds))


def span_text(delta: timedelta) -> str:
    """A length of time without 'ago': `4 min`, `2 h 5 min`, `3 d`."""
    return humanize_delta(delta).removesuffix(" ago")


def humanize_delta(delta: timedelta) -> str:
    """`12 s ago`, `3 h 5 min ago`, `in 2 d`: how long ago (or until) a moment is."""
    seconds = int(delta.total_seconds())
    future = seconds < 0
    seconds = abs(seconds)
    if seconds < 60:
        text = f"{seconds} s"
    elif seconds < 3600:
        text = f"{seconds // 60} min"
    elif seconds < 86400:
        hours, minutes = divmod(seconds // 60, 60)
        text = f"{hours} h {minutes} min" if minutes and hours < 10 else f"{hours} h"
    else:
        days, hours = divmod(seconds // 3600, 24)
        text = f"{days} d {hours} h" if hours and days < 10 else f"{days} d"
    return f"in {text}" if future else f"{text} ago"
