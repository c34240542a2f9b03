"""Saving a schedule in the admin while the beat fires it: real interleavings of two
PostgreSQL sessions (tests/support/races.py), no sleeps. The admin writes only what its form
edits; the beat's columns (next and last tick, last run, skipped ticks) are the beat's."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from runs import engine
from runs.admin import ScheduleAdmin
from runs.engine.tools import db_now
from runs.models import Run, Schedule
from tests.conftest import make_user
from tests.support.races import Background

pytestmark = pytest.mark.django_db(transaction=True)


def form_of(schedule: Schedule, **changes: str) -> dict[str, str]:
    form = {
        "name": schedule.name,
        "workflow": schedule.workflow,
        "version": "" if schedule.version is None else str(schedule.version),
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "input": json.dumps(schedule.input),
        "missed": schedule.missed,
        "max_catch_up": str(schedule.max_catch_up),
    }
    if schedule.enabled:
        form["enabled"] = "on"
    form.update(changes)
    return form


def test_saving_a_schedule_the_beat_fired_meanwhile_keeps_the_beats_columns(client, monkeypatch):
    """The operator's POST loads the row, then the beat fires its due ticks and
    commits, then the admin saves: the beat's columns must survive the save, and the
    operator's edit must land."""
    first = (db_now() - timedelta(minutes=5)).replace(second=0, microsecond=0)
    schedule = Schedule.objects.create(
        name="nightly",
        workflow="charge-payment",
        cron="* * * * *",
        input={"amount": 5},
        next_tick_at=first,
    )
    client.force_login(make_user("olivia", "operators"))
    real = ScheduleAdmin.save_form
    fired: list[Any] = []

    def save_form(self: ScheduleAdmin, request: Any, form: Any, change: bool) -> Any:
        fired.append(Background(engine.fire_due_schedules).join())
        return real(self, request, form, change)

    monkeypatch.setattr(ScheduleAdmin, "save_form", save_form)
    answer = client.post(
        f"/admin/runs/schedule/{schedule.pk}/change/", form_of(schedule, max_catch_up="50")
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]

    (report,) = fired
    assert len(report.submitted) == 1 and report.skipped == 5
    (run,) = Run.objects.filter(workflow="charge-payment")
    schedule.refresh_from_db()
    assert schedule.max_catch_up == 50
    assert schedule.next_tick_at > db_now()
    assert schedule.last_tick_at == report.submitted[0][1]
    assert (schedule.last_run_id, schedule.skipped_ticks) == (run.id, 5)
    # and the beat does not fire the same ticks again
    assert engine.fire_due_schedules().submitted == []


def test_a_paused_schedule_enabled_again_in_the_admin_starts_at_its_next_tick(client):
    """The restart the admin decides (here: enabled again) is written with the form's
    fields: pausing is not missing, so the paused minutes are neither fired nor
    counted as skipped."""
    first = (db_now() - timedelta(minutes=5)).replace(second=0, microsecond=0)
    schedule = Schedule.objects.create(
        name="paused",
        workflow="charge-payment",
        cron="* * * * *",
        input={"amount": 5},
        next_tick_at=first,
        enabled=False,
    )
    client.force_login(make_user("olivia", "operators"))
    answer = client.post(
        f"/admin/runs/schedule/{schedule.pk}/change/", form_of(schedule, enabled="on")
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    schedule.refresh_from_db()
    assert schedule.enabled and schedule.next_tick_at > db_now()
    report = engine.fire_due_schedules()
    assert (report.submitted, report.skipped) == ([], 0)
