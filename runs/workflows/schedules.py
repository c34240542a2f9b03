"""A schedule's own fields (name, cron, time zone, missed-tick policy), checked where
they are declared: in a workflow's code, in the admin, before a beat fires them."""

from __future__ import annotations

import re
import zoneinfo

from croniter import croniter

MISSED_POLICIES = ("skip", "catch_up")

NAME_PATTERN = re.compile(r"[A-Za-z0-9._-]{1,100}")


def check_schedule_fields(
    *, name: str, cron: str, timezone: str, missed: str, max_catch_up: int
) -> dict[str, str]:
    """Problems with a schedule's own fields, by field name (empty: none)."""
    problems: dict[str, str] = {}
    if not NAME_PATTERN.fullmatch(name or ""):
        problems["name"] = "use 1 to 100 letters, digits, '.', '_' or '-'"
    if not croniter.is_valid(cron or ""):
        problems["cron"] = (
            f"{cron!r} is not a cron expression: five fields (minute hour day month weekday), "
            "or six with seconds last, e.g. '0 3 * * *'"
        )
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        problems["timezone"] = f"unknown time zone {timezone!r} (an IANA name, e.g. Europe/Paris)"
    if missed not in MISSED_POLICIES:
        problems["missed"] = f"must be one of {', '.join(MISSED_POLICIES)}"
    if not isinstance(max_catch_up, int) or max_catch_up < 1:
        problems["max_catch_up"] = "must be at least 1"
    return problems
