"""Schedules: a run per tick, missed ticks by policy, refusals that say why."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

import pytest

from runs import engine
from runs.engine.tools import db_now, due_ticks, next_tick_after, sync_declared_schedules, tick_key
from runs.engine.tools import schedules_module as schedules
from runs.models import Run, Schedule, SubmissionKey
from runs.principals import Principal
from runs.workflows import PURE, Context, Workflow, WorkflowDefinitionError
from tests.support.declared import registered

pytestmark = pytest.mark.django_db

EVERY_MINUTE = "* * * * *"


def make_schedule(name: str = "nightly", *, minutes_missed: int = 5, **fields: object) -> Schedule:
    """A schedule whose first unsubmitted tick lies `minutes_missed` minutes back, as
    if everything had been down since."""
    first = (db_now() - timedelta(minutes=minutes_missed)).replace(second=0, microsecond=0)
    values: dict[str, object] = {
        "name": name,
        "workflow": "charge-payment",
        "cron": EVERY_MINUTE,
        "input": {"amount": 5},
        "next_tick_at": first,
    }
    values.update(fields)
    return Schedule.objects.create(**values)


def scheduled_keys(name: str) -> list[str]:
    return sorted(
        SubmissionKey.objects.filter(key__startswith=f"schedule:{name}:").values_list(
            "key", flat=True
        )
    )


def test_catch_up_submits_every_missed_tick_once_oldest_first():
    schedule = make_schedule(missed=Schedule.Missed.CATCH_UP)
    first = schedule.next_tick_at
    report = engine.fire_due_schedules()
    ticks = [tick for _, tick, _ in report.submitted]
    assert len(ticks) == 6  # the first missed tick, four more, and the current minute
    assert ticks == sorted(ticks) and ticks[0] == first
    assert scheduled_keys("nightly") == sorted(tick_key("nightly", t) for t in ticks)
    assert Run.objects.filter(workflow="charge-payment").count() == 6
    schedule.refresh_from_db()
    assert schedule.next_tick_at > db_now() and schedule.skipped_ticks == 0
    assert schedule.last_tick_at == ticks[-1]

    again = engine.fire_due_schedules()
    assert again.submitted == [] and Run.objects.count() == 6


def test_skip_submits_only_the_latest_tick_and_counts_the_others():
    make_schedule()  # missed defaults to skip
    report = engine.fire_due_schedules()
    assert len(report.submitted) == 1 and report.skipped == 5
    latest = report.submitted[0][1]
    assert latest == db_now().replace(second=0, microsecond=0)
    assert Run.objects.count() == 1
    assert Schedule.objects.get().skipped_ticks == 5


def test_catch_up_is_bounded_by_max_catch_up():
    make_schedule(missed=Schedule.Missed.CATCH_UP, max_catch_up=3)
    report = engine.fire_due_schedules()
    assert len(report.submitted) == 3 and report.skipped == 3
    assert Run.objects.count() == 3


def test_a_tick_submitted_before_the_beat_died_is_not_submitted_again():
    """The beat submitted the tick and died before advancing the schedule: the next
    beat finds the tick's key taken and moves on."""
    schedule = make_schedule(minutes_missed=0)
    key = tick_key("nightly", schedule.next_tick_at)
    earlier = engine.submit(
        workflow="charge-payment",
        input={"amount": 5},
        key=key,
        by=Principal.schedule("nightly"),  # as the beat that died submitted it
    ).run
    report = engine.fire_due_schedules()
    assert report.submitted == [] and report.existing == 1
    assert list(Run.objects.values_list("id", flat=True)) == [earlier.id]
    schedule.refresh_from_db()
    assert schedule.last_run_id == earlier.id and schedule.next_tick_at > db_now()


def test_a_refused_input_keeps_the_tick_due_and_says_why():
    schedule = make_schedule(minutes_missed=0, input={"amount": "five"})
    due = schedule.next_tick_at
    report = engine.fire_due_schedules()
    assert report.submitted == [] and "nightly" in report.errors
    schedule.refresh_from_db()
    assert schedule.next_tick_at == due  # not lost: it is submitted once the input is fixed
    assert "field 'amount'" in schedule.last_error and Run.objects.count() == 0

    Schedule.objects.filter(pk=schedule.pk).update(input={"amount": 5})
    report = engine.fire_due_schedules()
    assert [tick for _, tick, _ in report.submitted] == [due]
    schedule.refresh_from_db()
    assert schedule.last_error == ""


def test_disabled_schedules_do_not_fire():
    make_schedule(enabled=False)
    assert engine.fire_due_schedules().submitted == []
    assert Run.objects.count() == 0


def test_due_ticks_on_whole_seconds_and_time_zones():
    now = db_now()
    # (now - 3 h, now] holds exactly three hourly ticks, whatever the time of day.
    first = now - timedelta(hours=3) + timedelta(microseconds=1)
    ticks, left_out = due_ticks("0 * * * *", "Asia/Kolkata", first, now, keep=10)
    # Kolkata is UTC+5:30: its whole hours fall on UTC half hours.
    assert all(t.minute == 30 for t in ticks) and left_out == 0
    assert len(ticks) == 3
    per_second, _ = due_ticks("* * * * * *", "UTC", now - timedelta(seconds=3), now, keep=100)
    assert len(per_second) in (3, 4)  # [now-3s, now] holds 3 or 4 whole seconds


# -- daylight saving time (the rule: runs/engine/policies/schedules.py) ---------------------------
NEW_YORK = "America/New_York"


def utc(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0
) -> datetime:
    return datetime(year, month, day, hour, minute, second, tzinfo=UTC)


# 2026-11-01 in New York: at 02:00 EDT (06:00 UTC) clocks go back to 01:00 EST, so every
# local time from 01:00 to 01:59:59 happens twice; the local day is 25 hours long.
FALL_BACK_DAY = (utc(2026, 11, 1, 4), utc(2026, 11, 2, 5))
# 2026-03-08: at 02:00 EST (07:00 UTC) clocks go forward to 03:00 EDT, so no local time
# from 02:00 to 02:59:59 happens; the local day is 23 hours long.
SPRING_FORWARD_DAY = (utc(2026, 3, 8, 5), utc(2026, 3, 9, 4))


def ticks_walked(cron: str, start: datetime, end: datetime) -> list[datetime]:
    """The ticks in [start, end) one next_tick_after at a time, as beats advance a
    schedule."""
    ticks = []
    tick = next_tick_after(cron, NEW_YORK, start - timedelta(seconds=1))
    while tick < end:
        ticks.append(tick)
        tick = next_tick_after(cron, NEW_YORK, tick)
    return ticks


def ticks_due(cron: str, start: datetime, end: datetime) -> list[datetime]:
    """The ticks in [start, end) in one due_ticks walk, as after a long outage."""
    ticks, left_out = due_ticks(cron, NEW_YORK, start, end - timedelta(seconds=1), keep=100)
    assert left_out == 0
    return ticks


def test_a_time_of_day_the_fall_back_repeats_fires_at_its_first_occurrence_only():
    first_only = [utc(2026, 11, 1, 5, 30)]  # 01:30 EDT, not 01:30 EST (06:30 UTC) as well
    assert ticks_walked("30 1 * * *", *FALL_BACK_DAY) == first_only
    assert ticks_due("30 1 * * *", *FALL_BACK_DAY) == first_only


def test_missed_ticks_across_the_fall_back_leave_out_the_repeated_occurrence():
    first, now = utc(2026, 10, 30), utc(2026, 11, 1, 12)
    days = [utc(2026, 10, 30, 5, 30), utc(2026, 10, 31, 5, 30), utc(2026, 11, 1, 5, 30)]
    assert due_ticks("30 1 * * *", NEW_YORK, first, now, keep=10) == (days, 0)  # catch_up
    assert due_ticks("30 1 * * *", NEW_YORK, first, now, keep=1) == (days[-1:], 2)  # skip


def test_a_time_of_day_the_spring_forward_skips_fires_once_at_the_change():
    at_the_change = [utc(2026, 3, 8, 7)]  # 03:00 EDT: 02:30 does not exist that night
    assert ticks_walked("30 2 * * *", *SPRING_FORWARD_DAY) == at_the_change
    assert ticks_due("30 2 * * *", *SPRING_FORWARD_DAY) == at_the_change


@pytest.mark.parametrize("minute", [0, 30])
@pytest.mark.parametrize(
    ("day", "hours"), [(FALL_BACK_DAY, 25), (SPRING_FORWARD_DAY, 23)], ids=["fall", "spring"]
)
def test_an_hourly_schedule_fires_once_every_real_hour_across_the_changes(day, hours, minute):
    """New York's offsets are whole hours: every real hour of the local day is one UTC
    hour, repeated or not, and the hour that does not exist has no tick."""
    every_hour = [day[0] + timedelta(hours=h, minutes=minute) for h in range(hours)]
    assert ticks_walked(f"{minute} * * * *", *day) == every_hour
    assert ticks_due(f"{minute} * * * *", *day) == every_hour


@pytest.mark.parametrize(
    ("cron", "day", "expected"),
    [
        (
            "*/20 1 * * *",
            FALL_BACK_DAY,
            [utc(2026, 11, 1, 5, 0) + timedelta(minutes=20 * n) for n in range(6)],
        ),
        ("*/20 2 * * *", SPRING_FORWARD_DAY, []),
    ],
    ids=["fall", "spring"],
)
def test_a_wildcard_minute_follows_elapsed_time_in_an_hour_the_change_repeats_or_skips(
    cron, day, expected
):
    """Every twenty minutes during the 1 o'clock hour: both 1 o'clock hours of the
    fall-back night; and none on the spring-forward night, which has no 2 o'clock hour."""
    assert ticks_walked(cron, *day) == expected
    assert ticks_due(cron, *day) == expected


def test_a_tick_in_the_repeated_hour_is_due_within_that_hour():
    second_one_oclock = utc(2026, 11, 1, 6)  # 01:00 EST; the beat runs at 01:00:30 EST
    beat = second_one_oclock + timedelta(seconds=30)
    assert due_ticks("0 * * * *", NEW_YORK, second_one_oclock, beat, keep=1) == (
        [second_one_oclock],
        0,
    )
    # 01:30 EDT, found by a beat that was down until 01:10 EST.
    first_half_past_one, late_beat = utc(2026, 11, 1, 5, 30), utc(2026, 11, 1, 6, 10)
    assert due_ticks("30 1 * * *", NEW_YORK, first_half_past_one, late_beat, keep=1) == (
        [first_half_past_one],
        0,
    )


def beats(monkeypatch: pytest.MonkeyPatch, moments: Iterable[datetime]) -> list[datetime]:
    """Run the beat at each of `moments` on the database's clock; the ticks it submitted.

    The moments lie in the past: the selection of due rows (next_tick_at <= now() in
    SQL) takes every schedule at every beat, and the clock db_now() reads, the one
    fire_due_schedules computes due ticks and next_tick_at with, decides."""
    submitted: list[datetime] = []
    for moment in moments:
        monkeypatch.setattr(schedules, "db_now", lambda moment=moment: moment)
        submitted += [tick for _, tick, _ in engine.fire_due_schedules(limit=1).submitted]
    return submitted


EVERY_TEN_MINUTES_THAT_NIGHT = [
    utc(2026, 11, 1, 4, 0, 30) + timedelta(minutes=10 * n) for n in range(24)
]  # 00:00:30 EDT to 01:50:30 EST


@pytest.mark.parametrize("missed", [Schedule.Missed.SKIP, Schedule.Missed.CATCH_UP])
@pytest.mark.parametrize(
    "moments",
    [EVERY_TEN_MINUTES_THAT_NIGHT, [utc(2026, 11, 1, 12)]],
    ids=["beat every ten minutes", "beat down all night"],
)
def test_a_daily_schedule_submits_one_run_on_the_fall_back_day(monkeypatch, moments, missed):
    schedule = Schedule.objects.create(
        name="invoices",
        workflow="charge-payment",
        cron="30 1 * * *",
        timezone=NEW_YORK,
        input={"amount": 5},
        missed=missed,
        next_tick_at=utc(2026, 11, 1, 5, 30),
    )
    assert beats(monkeypatch, moments) == [utc(2026, 11, 1, 5, 30)]
    assert scheduled_keys("invoices") == [tick_key("invoices", utc(2026, 11, 1, 5, 30))]
    assert Run.objects.count() == 1
    schedule.refresh_from_db()
    assert schedule.next_tick_at == utc(2026, 11, 2, 6, 30)  # 01:30 EST, the next day
    assert schedule.skipped_ticks == 0


def test_an_hourly_schedule_submits_a_run_every_real_hour_of_the_fall_back_night(monkeypatch):
    Schedule.objects.create(
        name="hourly",
        workflow="charge-payment",
        cron="0 * * * *",
        timezone=NEW_YORK,
        input={"amount": 5},
        next_tick_at=utc(2026, 11, 1, 4),
    )
    # 00:00 EDT, 01:00 EDT, 01:00 EST, 02:00 EST
    hours = [utc(2026, 11, 1, h) for h in (4, 5, 6, 7)]
    assert beats(monkeypatch, EVERY_TEN_MINUTES_THAT_NIGHT) == hours
    assert scheduled_keys("hourly") == [tick_key("hourly", h) for h in hours]


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"cron": "every day"}, "cron", "not a cron expression"),
        ({"timezone": "Mars/Olympus"}, "timezone", "unknown time zone"),
        ({"name": "a b"}, "name", "letters, digits"),
        ({"workflow": "nope"}, "workflow", "no workflow 'nope'"),
        ({"input": {"amount": -1}}, "input", "at least"),
        ({"max_catch_up": 0}, "max_catch_up", "at least 1"),
    ],
)
def test_a_bad_row_is_refused_by_field(fields, field, words):
    from django.core.exceptions import ValidationError

    values = {"name": "ok", "workflow": "charge-payment", "cron": EVERY_MINUTE}
    values["input"] = {"amount": 5}
    values.update(fields)
    with pytest.raises(ValidationError) as caught:
        Schedule(**values).full_clean()
    assert words in " ".join(caught.value.message_dict[field])


def test_declared_schedules_are_checked_when_declared():
    wf = Workflow("sched-decl", version=1, input={"n": int})
    with pytest.raises(WorkflowDefinitionError, match="not a cron expression"):
        wf.schedule("every day", input={"n": 1})
    with pytest.raises(WorkflowDefinitionError, match="refuses"):
        wf.schedule("0 3 * * *", input={"n": "one"})


@pytest.fixture
def declared_workflow():
    """A workflow with schedules, registered only for one test (a schedule declared
    in a module every worker loads would fire in every other test)."""
    wf = Workflow("sched-decl", version=1, input={"n": int, "tick": str})

    @wf.step(kind=PURE)
    def only(ctx: Context) -> int:
        return int(ctx.input["n"])

    @wf.schedule("0 3 * * *", name="nightly-decl")
    def nightly(tick):
        return {"n": 1, "tick": tick.isoformat()}

    with registered(wf):
        yield wf


def test_declared_schedules_become_rows_and_code_owns_them(declared_workflow):
    assert sync_declared_schedules() == 1
    row = Schedule.objects.get(name="nightly-decl")
    assert row.declared_in_code and row.enabled and row.cron == "0 3 * * *"
    assert row.next_tick_at.hour == 3 and row.next_tick_at > db_now()

    # The admin paused it; the code moved it to 4 o'clock: paused stays paused.
    Schedule.objects.filter(pk=row.pk).update(enabled=False)
    declared_workflow.schedules.clear()
    declared_workflow.schedule("0 4 * * *", name="nightly-decl", input={"n": 2, "tick": "-"})
    sync_declared_schedules()
    row.refresh_from_db()
    assert not row.enabled and row.cron == "0 4 * * *" and row.next_tick_at.hour == 4


def test_a_declared_schedule_computes_its_input_from_the_tick(declared_workflow):
    sync_declared_schedules()
    # The latest 03:00 that has passed: the one tick due, whatever the time of day.
    tick = next_tick_after("0 3 * * *", "UTC", db_now()) - timedelta(days=1)
    Schedule.objects.filter(name="nightly-decl").update(next_tick_at=tick)
    report = engine.fire_due_schedules()
    assert [t for _, t, _ in report.submitted] == [tick]
    run = Run.objects.get(workflow="sched-decl")
    assert run.input == {"n": 1, "tick": tick.isoformat()}


def test_an_operator_adds_a_schedule_in_the_admin_and_a_bad_cron_is_refused(client):
    from tests.conftest import make_user

    client.force_login(make_user("olivia", "operators"))  # staff, not a superuser
    form = {
        "name": "hourly-charge",
        "workflow": "charge-payment",
        "version": "",
        "cron": "every hour",
        "timezone": "UTC",
        "input": '{"amount": 5}',
        "missed": "skip",
        "max_catch_up": "100",
        "enabled": "on",
    }
    refused = client.post("/admin/runs/schedule/add/", form)
    assert refused.status_code == 200 and "not a cron expression" in refused.content.decode()
    assert not Schedule.objects.exists()

    added = client.post("/admin/runs/schedule/add/", {**form, "cron": "0 * * * *"})
    assert added.status_code == 302, added.content.decode()[:2000]
    schedule = Schedule.objects.get()
    assert schedule.next_tick_at > db_now() and schedule.next_tick_at.minute == 0


def test_a_viewer_cannot_reach_schedules_in_the_admin(client):
    from tests.conftest import make_user

    client.force_login(make_user("victor", "viewers"))
    response = client.get("/admin/runs/schedule/")
    assert response.status_code in (302, 403)
