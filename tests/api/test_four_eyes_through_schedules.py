"""Separation of duties whatever the way a run starts (docs/api.md#principals): a run a
schedule fires carries the people who made and changed the schedule (Run.on_behalf_of),
and none of them may approve it; `submit_run --actor` records the account that submits,
and a workflow that waits for an approval refuses a submission from nobody in
particular. Through the admin's form and the API, as an operator would go."""

from __future__ import annotations

from datetime import datetime

import pytest
from croniter import croniter
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client

from runs import engine
from runs.models import Run, Schedule, Signal
from runs.states import RunStatus
from tests.conftest import make_user
from tests.support.api import error_of, token_client
from tests.support.factories import run_queued

pytestmark = pytest.mark.django_db

REFUND = {"ticket": 7, "amount": 99999}


def _admin_form(**changes: str) -> dict[str, str]:
    form = {
        "name": "refunds",
        "workflow": "agent-refund",
        "version": "",
        "cron": "* * * * *",
        "timezone": "UTC",
        "input": '{"ticket": 7, "amount": 99999}',
        "missed": "skip",
        "max_catch_up": "100",
        "enabled": "on",
    }
    return {**form, **changes}


def _save_in_admin(user, pk: int | None = None, **changes: str) -> None:
    client = Client()
    client.force_login(user)
    path = "/admin/runs/schedule/add/" if pk is None else f"/admin/runs/schedule/{pk}/change/"
    response = client.post(path, _admin_form(**changes))
    assert response.status_code == 302, response.content.decode()[:2000]


def _fire(schedule: Schedule) -> Run:
    """The schedule's latest tick is due now: the beat fires it and its run reaches the
    approval. The tick is the cron's own (a `*/2` schedule has none in most minutes)."""
    before = set(Run.objects.values_list("id", flat=True))
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        now = cursor.fetchone()[0]
    latest = croniter(schedule.cron, now).get_prev(datetime)
    Schedule.objects.filter(pk=schedule.pk).update(next_tick_at=latest)
    report = engine.fire_due_schedules()
    assert len(report.submitted) == 1, report
    run = Run.objects.exclude(id__in=before).get()
    run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    return run


def _approve(user, run: Run):
    return token_client(user).post(
        f"/api/runs/{run.id}/signals/approval/", {"payload": {"approved": True}}, format="json"
    )


def test_an_operator_cannot_approve_a_run_fired_by_a_schedule_they_made():
    olivia = make_user("olivia", "operators")
    _save_in_admin(olivia)
    schedule = Schedule.objects.get(name="refunds")
    assert (schedule.created_by, schedule.changed_by, schedule.input_set_by) == (
        "user:olivia",
        "user:olivia",
        "user:olivia",
    )

    run = _fire(schedule)
    assert (run.submitted_by, run.on_behalf_of) == ("schedule:refunds", ["user:olivia"])

    error = error_of(_approve(olivia, run), 403, "permission_denied")
    assert "someone other than olivia, who made or changed schedule refunds" in error["message"]
    assert not Signal.objects.filter(run=run).exists()

    oscar = make_user("oscar", "operators")
    page = Client()
    page.force_login(oscar)
    assert "<dd>schedule refunds, for olivia</dd>" in page.get(f"/runs/{run.id}/").content.decode()
    assert _approve(oscar, run).status_code == 201
    assert list(Signal.objects.filter(run=run).values_list("actor", flat=True)) == ["oscar"]


def test_whoever_changed_what_a_schedule_submits_cannot_approve_its_runs_after_a_later_change():
    """Oscar changes the refund's input; Pat then changes only the cron. Pat is the last
    to change it, and Oscar still set what it submits: neither approves (nor Olivia, who
    made it); a fourth operator does."""
    olivia, oscar, pat = (make_user(n, "operators") for n in ("olivia", "oscar", "pat"))
    _save_in_admin(olivia, input='{"ticket": 7, "amount": 10}')
    schedule = Schedule.objects.get(name="refunds")
    _save_in_admin(oscar, schedule.pk)  # the input: an amount of 99,999
    _save_in_admin(pat, schedule.pk, cron="*/2 * * * *")
    schedule.refresh_from_db()
    assert (schedule.created_by, schedule.changed_by, schedule.input_set_by) == (
        "user:olivia",
        "user:pat",
        "user:oscar",
    )

    run = _fire(schedule)
    assert run.input["amount"] == 99999
    assert run.on_behalf_of == ["user:olivia", "user:oscar", "user:pat"]
    for person in (olivia, oscar, pat):
        error_of(_approve(person, run), 403, "permission_denied")
    assert not Signal.objects.filter(run=run).exists()
    assert _approve(make_user("quinn", "operators"), run).status_code == 201


def test_a_run_fired_before_a_schedule_changed_keeps_the_people_of_then():
    olivia, oscar = make_user("olivia", "operators"), make_user("oscar", "operators")
    _save_in_admin(olivia)
    schedule = Schedule.objects.get(name="refunds")
    run = _fire(schedule)
    _save_in_admin(oscar, schedule.pk, input='{"ticket": 8, "amount": 1}')

    assert Run.objects.get(pk=run.pk).on_behalf_of == ["user:olivia"]
    assert _approve(oscar, run).status_code == 201


def test_submit_run_records_the_account_named_by_actor_and_four_eyes_holds():
    oscar, olivia = make_user("oscar", "operators"), make_user("olivia", "operators")
    call_command("submit_run", "agent-refund", "--input", '{"ticket": 9, "amount": 10}',
                 "--actor", "oscar")  # fmt: skip
    run = Run.objects.get(workflow="agent-refund")
    assert (run.submitted_by, run.submitted_via) == ("user:oscar", "cli")
    run_queued(run)

    with pytest.raises(CommandError, match="someone other than oscar, who submitted"):
        call_command("send_signal", str(run.id), "approval", "--payload",
                     '{"approved": true}', "--actor", "oscar")  # fmt: skip
    error_of(_approve(oscar, run), 403, "permission_denied")
    assert not Signal.objects.filter(run=run).exists()
    assert _approve(olivia, run).status_code == 201


def test_a_submitter_submits_from_the_command_line_as_itself():
    make_user("sam", "submitters")
    call_command("submit_run", "agent-refund", "--input", '{"ticket": 9, "amount": 10}',
                 "--actor", "sam")  # fmt: skip
    assert list(Run.objects.values_list("submitted_by", "submitted_via")) == [("user:sam", "cli")]


@pytest.mark.parametrize(
    ("actor", "message"),
    [
        (None, "name the submitter with --actor USERNAME"),
        ("nobody-here", "no active account named 'nobody-here'"),
        ("victor", "victor may not submit runs"),
    ],
)
def test_submit_run_refuses_an_approval_workflow_without_a_known_submitter(actor, message):
    make_user("victor", "viewers")
    args = ["submit_run", "agent-refund", "--input", '{"ticket": 9, "amount": 10}']
    with pytest.raises(CommandError, match=message):
        call_command(*args, *(["--actor", actor] if actor else []))
    assert not Run.objects.exists()


def test_submit_run_without_actor_still_submits_a_workflow_with_no_approval():
    call_command("submit_run", "merge-change", "--input", '{"change_id": 3}')
    assert list(Run.objects.values_list("submitted_by", "submitted_via")) == [("cli", "cli")]
