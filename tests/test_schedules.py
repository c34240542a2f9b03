"""Schedules (#13): a run per tick, missed ticks by policy, refusals that say why."""

from __future__ import annotations

from datetime import timedelta

import pytest

from runs import engine
from runs.engine.schedules import (
    db_now,
    due_ticks,
    next_tick_after,
    sync_declared_schedules,
    tick_key,
)
from runs.models import Run, Schedule, SubmissionKey
from runs.workflows import PURE, Context, Workflow, WorkflowDefinitionError, registry

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
    earlier = engine.submit(workflow="charge-payment", input={"amount": 5}, key=key).run
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

    registry._registry[("sched-decl", 1)] = wf
    try:
        yield wf
    finally:
        registry._registry.pop(("sched-decl", 1), None)


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
