"""Schedules: a run per cron tick, never two.

The beat calls fire_due_schedules() every RUNS_SCHEDULE_INTERVAL seconds. Each due
schedule row is locked with SKIP LOCKED (two beats, or two workers running the task,
never work on the same schedule at once), its due ticks are computed on the
database's clock, and each tick is submitted with the submission key
`schedule:<name>:<tick>` in the same transaction that advances `next_tick_at`. The key
is what makes a tick exactly-once: a beat that dies after submitting and before
advancing, a restarted beat, or a second beat firing the same tick later all find
the key taken and get the run the first submission created.

Missed ticks (everything was down, or the beat was) follow the schedule's policy:
`skip` submits only the latest due tick and counts the others; `catch_up` submits the
latest `max_catch_up` due ticks, oldest first. A paused schedule, when enabled
again, starts at the next tick: pausing is not missing.

Daylight saving time follows cron's rule (Vixie cron, cron(8)). Ticks are the cron's
times on the schedule's local clock, keyed by their UTC instant; what happens when that
clock repeats or skips an hour depends on the kind of schedule:

- A schedule with '*' at the start of its minute or hour field (`0 * * * *`,
  `*/15 * * * *`, `*/20 1 * * *`, @hourly) runs by elapsed time. A time the
  fall-back repeats fires at both occurrences: `0 * * * *` in America/New_York fires
  25 times on 2026-11-01, once each real hour. A time the spring-forward skips does
  not fire: 23 times on 2026-03-08.
- A schedule at fixed times of day (minute and hour without '*': `30 1 * * *`,
  `0 1-3 * * *`) fires once per local date and time. A time the fall-back repeats
  fires at its first occurrence only (01:30 EDT, not 01:30 EST as well); a time the
  spring-forward skips fires once, at the change (02:30 on 2026-03-08 fires at 03:00
  EDT). A repeated occurrence is not a tick at all: never submitted, never counted
  as skipped.
"""

from __future__ import annotations

import json
import zoneinfo
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter
from django.db import connection, transaction
from django.db.models import F
from django.db.models.functions import Now

from runs import sql
from runs.errors import SubmissionKeyConflict
from runs.models import Schedule
from runs.principals import Principal
from runs.workflows import registry
from runs.workflows.definition import ScheduleDef

from .submit import submit

SQL = sql.load(__file__)

# Counting skipped ticks walks the cron backwards; past this many, the count is a floor
# (a per-second schedule down for a week would otherwise cost a long walk).
SKIP_COUNT_CAP = 10_000


# -- ticks ------------------------------------------------------------------------


def _every_occurrence(walker: croniter) -> bool:
    """Whether the schedule runs by elapsed time rather than at fixed times of day:
    '*' begins its minute or its hour field ('*', '*/15'; @hourly expands to one)."""
    minute, hour = walker.expressions[0], walker.expressions[1]
    return str(minute).startswith("*") or str(hour).startswith("*")


def _fires(cron: str, tick: datetime, zone: zoneinfo.ZoneInfo, *, every: bool) -> bool:
    """Whether a tick croniter gives (in UTC) fires under the module's DST rule."""
    local = tick.astimezone(zone)  # fold=1: the second occurrence of a repeated time
    if not every:
        return local.fold == 0
    # croniter moves a time the spring-forward skips to the change (02:30 -> 03:00); a
    # schedule running by elapsed time does not run then, unless the change itself is
    # one of its times (03:00 for `0 * * * *`).
    if local.utcoffset() == (tick - timedelta(seconds=1)).astimezone(zone).utcoffset():
        return True
    return bool(croniter.match(cron, local.replace(tzinfo=None)))


def next_tick_after(cron: str, timezone: str, moment: datetime) -> datetime:
    """The first tick strictly after `moment`, in UTC."""
    zone = zoneinfo.ZoneInfo(timezone)
    walker = croniter(cron, moment.astimezone(zone).replace(microsecond=0))
    every = _every_occurrence(walker)
    while True:
        tick: datetime = walker.get_next(datetime).astimezone(UTC)
        if _fires(cron, tick, zone, every=every):
            return tick


def due_ticks(
    cron: str, timezone: str, first: datetime, now: datetime, *, keep: int
) -> tuple[list[datetime], int]:
    """The latest `keep` ticks in [first, now], oldest first, and how many earlier
    ticks in that range are left out (a floor past SKIP_COUNT_CAP)."""
    zone = zoneinfo.ZoneInfo(timezone)
    # Ticks fall on whole seconds: the last one <= now is the one before now's second + 1.
    # The second is added in UTC: a local time + timedelta loses its fold, and in the
    # repeated hour of a fall-back the walk would start an hour early.
    start = now.astimezone(UTC).replace(microsecond=0) + timedelta(seconds=1)
    walker = croniter(cron, start.astimezone(zone))
    every = _every_occurrence(walker)
    kept: list[datetime] = []
    left_out = 0
    while True:
        tick = walker.get_prev(datetime).astimezone(UTC)
        if tick < first:
            break
        if not _fires(cron, tick, zone, every=every):
            continue  # not a tick at all: neither submitted nor counted as skipped
        if len(kept) < keep:
            kept.append(tick)
        else:
            left_out += 1
            if left_out >= SKIP_COUNT_CAP:
                break
    kept.reverse()
    return kept, left_out


def tick_key(name: str, tick: datetime) -> str:
    """The submission key of schedule `name`'s run for `tick` (UTC, to the second):
    two beats firing one tick submit one run. Raises nothing."""
    return f"schedule:{name}:{tick.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%SZ')}"


def db_now() -> datetime:
    """The database's clock: every worker and beat agrees on it (docs/architecture.md#recovery)."""
    with connection.cursor() as cursor:
        cursor.execute(SQL["db_now"])
        now: datetime = cursor.fetchone()[0]
    return now


# -- declared schedules -------------------------------------------------------------


def declared_schedules() -> dict[str, ScheduleDef]:
    return {s.name: s for wf in registry.all_workflows() for s in wf.schedules}


def sync_declared_schedules() -> int:
    """Create or update the row of every schedule declared in code. The code owns
    cron, time zone, policy and input; `enabled` stays as the admin left it. A row
    whose cron or time zone changed restarts at its next tick."""
    declared = list(declared_schedules().values())
    if not declared:
        return 0
    now = db_now()
    rows: list[dict[str, Any]] = [
        {
            "name": s.name,
            "workflow": s.workflow,
            "version": s.version,
            "cron": s.cron,
            "timezone": s.timezone,
            "missed": s.missed,
            "max_catch_up": s.max_catch_up,
            "input": _json(s.input or {}),
            "next_tick_at": next_tick_after(s.cron, s.timezone, now),
        }
        for s in declared
    ]
    with connection.cursor() as cursor:
        cursor.executemany(SQL["sync_declared"], rows)
    return len(rows)


def _json(value: Any) -> str:
    return json.dumps(value)


def prepare_for_save(schedule: Schedule, previous: Schedule | None, *, by: str) -> list[str]:
    """Before the admin saves a row, given the row as it is now (`previous`, locked;
    None for a new schedule) and the principal saving it (`by`, `user:<username>`):
    a new schedule, a changed cron or time zone, or a schedule enabled again starts at
    its next tick from now (pausing is not missing). Whoever saves is recorded, and
    whoever sets what it submits (workflow, version, input) too: none of them may
    approve the runs it fires (Run.on_behalf_of). Returns the columns it set beyond the
    form's, which the save must write too."""
    people = _record_people(schedule, previous, by)
    restart = (
        previous is None
        or previous.next_tick_at is None
        or previous.cron != schedule.cron
        or previous.timezone != schedule.timezone
        or (schedule.enabled and not previous.enabled)
    )
    if not restart:
        return people
    schedule.next_tick_at = next_tick_after(schedule.cron, schedule.timezone, db_now())
    schedule.last_error = ""
    return [*people, "next_tick_at", "last_error"]


def _record_people(schedule: Schedule, previous: Schedule | None, by: str) -> list[str]:
    if not by:
        raise ValueError("a schedule is saved by someone: `by` names them")
    schedule.changed_by = by
    if previous is None:
        schedule.created_by = schedule.input_set_by = by
        return ["created_by", "changed_by", "input_set_by"]
    submits = (schedule.workflow, schedule.version, schedule.input)
    if submits != (previous.workflow, previous.version, previous.input):
        schedule.input_set_by = by
        return ["changed_by", "input_set_by"]
    return ["changed_by"]


# -- firing -------------------------------------------------------------------------


@dataclass
class FireReport:
    submitted: list[tuple[str, datetime, str]] = field(default_factory=list)  # name, tick, run
    existing: int = 0  # ticks whose key was already taken: a beat fired them before
    skipped: int = 0
    errors: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        return (
            f"submitted {len(self.submitted)}, already submitted {self.existing}, "
            f"skipped {self.skipped}, errors {len(self.errors)}"
        )


def fire_due_schedules(*, limit: int = 100) -> FireReport:
    """Submit every due tick of every enabled schedule (at most `limit` schedules per
    call; the next beat does the rest). One short transaction per schedule. Returns
    a FireReport; a schedule whose submission is refused is counted in its `errors`
    and does not stop the others."""
    sync_declared_schedules()
    declared = declared_schedules()
    report = FireReport()
    failed: list[int] = []
    for _ in range(limit):
        with transaction.atomic():
            schedule = (
                Schedule.objects.select_for_update(skip_locked=True)
                .filter(enabled=True, next_tick_at__lte=Now())
                .exclude(pk__in=failed)
                .order_by("next_tick_at")
                .first()
            )
            if schedule is None:
                break
            if not _fire(schedule, declared, report):
                failed.append(schedule.pk)
    return report


def _fire(schedule: Schedule, declared: dict[str, ScheduleDef], report: FireReport) -> bool:
    """Submit the due ticks of one locked schedule and advance it; False if a tick
    could not be submitted (the schedule stays due at that tick, with last_error)."""
    assert schedule.next_tick_at is not None
    now = db_now()
    keep = schedule.max_catch_up if schedule.missed == Schedule.Missed.CATCH_UP else 1
    ticks, left_out = due_ticks(
        schedule.cron, schedule.timezone, schedule.next_tick_at, now, keep=keep
    )
    definition = declared.get(schedule.name) if schedule.declared_in_code else None
    last_run: str | None = None
    for tick in ticks:
        try:
            if schedule.declared_in_code and definition is None:
                raise LookupError(
                    "declared in code, but no workflow this process loads declares it any more"
                )
            run_input = definition.input_for(tick) if definition else schedule.input
            with transaction.atomic():  # a savepoint: a refusal leaves the lock and row intact
                submission = submit(
                    workflow=schedule.workflow,
                    version=schedule.version,
                    input=run_input,
                    key=tick_key(schedule.name, tick),
                    by=Principal.schedule(schedule.name, schedule.people()),
                )
        except SubmissionKeyConflict:
            report.existing += 1  # fired before with another input: the tick is done
            continue
        except Exception as exc:
            message = f"tick {tick.isoformat()}: {exc}"
            Schedule.objects.filter(pk=schedule.pk).update(
                next_tick_at=tick,
                skipped_ticks=F("skipped_ticks") + left_out,
                last_error=message[:2000],
                updated_at=Now(),
            )
            report.skipped += left_out
            report.errors[schedule.name] = message
            return False
        last_run = str(submission.run.id)
        if submission.created:
            report.submitted.append((schedule.name, tick, last_run))
        else:
            report.existing += 1
    report.skipped += left_out
    Schedule.objects.filter(pk=schedule.pk).update(
        next_tick_at=next_tick_after(schedule.cron, schedule.timezone, now),
        last_tick_at=ticks[-1] if ticks else F("last_tick_at"),
        last_run_id=last_run if last_run else F("last_run_id"),
        skipped_ticks=F("skipped_ticks") + left_out,
        last_error="",
        updated_at=Now(),
    )
    return True
