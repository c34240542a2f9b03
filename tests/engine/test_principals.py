"""Who submitted a run, recorded on it for each way in (runs/principals.py,
docs/api.md "Principals"): the command line, a schedule's tick, the New run page, the
API signed in (the API with a token: tests/api/test_signal_permissions.py). A submission
key belongs to that principal too."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from runs import engine
from runs.engine.tools import db_now
from runs.models import Run, Schedule, SubmissionKey

pytestmark = pytest.mark.django_db

CHARGE = ("charge-payment", {"amount": 3})


def _recorded(run: Run) -> tuple[str, str]:
    run.refresh_from_db()
    return run.submitted_by, run.submitted_via


def test_submit_run_command_records_the_command_line():
    call_command("submit_run", CHARGE[0], "--input", '{"amount": 3}', "--key", "cli-key-1")

    run = Run.objects.get()
    assert _recorded(run) == ("cli", "cli")
    assert list(SubmissionKey.objects.values_list("scope", "key", "run_id")) == [
        ("cli", "cli-key-1", run.id)
    ]


def test_a_schedule_tick_records_the_schedule_by_name():
    tick = (db_now() - timedelta(minutes=1)).replace(second=0, microsecond=0)
    Schedule.objects.create(
        name="nightly",
        workflow=CHARGE[0],
        cron="* * * * *",
        input=CHARGE[1],
        next_tick_at=tick,
        missed=Schedule.Missed.SKIP,
    )

    report = engine.fire_due_schedules()

    [(_, _, run_id)] = report.submitted
    run = Run.objects.get(pk=run_id)
    assert _recorded(run) == ("schedule:nightly", "schedule")
    assert SubmissionKey.objects.get(run=run).scope == "schedule:nightly"


def test_the_new_run_page_records_the_signed_in_person(operator_client):
    response = operator_client.post(
        "/runs/new/", {"workflow": CHARGE[0], "version": "1", "input.amount": "3"}
    )

    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.id}/"
    assert _recorded(run) == ("user:olivia", "page")
    page = operator_client.get(f"/runs/{run.id}/").content.decode()
    assert "olivia (web page)" in page


def test_the_api_signed_in_by_session_records_the_person_and_the_way(operator):
    client = APIClient()
    client.force_login(operator)

    response = client.post("/api/runs/", {"workflow": CHARGE[0], "input": CHARGE[1]}, format="json")

    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert _recorded(run) == ("user:olivia", "api-session")
    assert response.json()["submitted_by"] == "user:olivia"
