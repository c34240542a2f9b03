"""Who may send a run's signals: a wait says (operators only, unless it lets submitters
too), and an approval-style wait (`four_eyes`) needs someone other than the run's
submitter. Decided by the engine's send_signal, so the API, the pages and the command
line agree; the run records who submitted it and who signalled it."""

from __future__ import annotations

import pytest
from django.core.management import CommandError, call_command

from runs import engine
from runs.errors import SignalNotAllowed
from runs.models import Run, Signal, Step
from runs.states import RunStatus, StepStatus
from tests.conftest import make_user
from tests.support.api import error_of, token_client
from tests.support.factories import run_queued

pytestmark = pytest.mark.django_db


def _submitted_by(user, workflow: str, data: dict) -> Run:
    response = token_client(user).post(
        "/api/runs/", {"workflow": workflow, "input": data}, format="json"
    )
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    run_queued(run)
    run.refresh_from_db()
    return run


def _approve(user, run: Run, approved: bool = True):
    return token_client(user).post(
        f"/api/runs/{run.id}/signals/approval/", {"payload": {"approved": approved}}, format="json"
    )


def test_a_service_account_cannot_pass_the_human_approval_of_its_own_run(submitter):
    run = _submitted_by(submitter, "agent-refund", {"ticket": 1, "amount": 10})
    assert run.status == RunStatus.WAITING

    error = error_of(_approve(submitter, run), 403, "permission_denied")

    assert "operators" in error["message"]
    assert not Signal.objects.filter(run=run).exists()
    assert Step.objects.get(run=run, name="approval").status == StepStatus.WAITING


def test_an_approval_needs_someone_other_than_the_submitter(operator):
    run = _submitted_by(operator, "agent-refund", {"ticket": 2, "amount": 10})

    error = error_of(_approve(operator, run), 403, "permission_denied")
    assert "someone other than" in error["message"]
    assert not Signal.objects.filter(run=run).exists()

    other = make_user("oscar", "operators")
    response = _approve(other, run)
    assert response.status_code == 201, response.content
    assert response.json()["actor"] == "oscar"


def test_an_operator_approves_a_service_accounts_run(submitter, operator):
    run = _submitted_by(submitter, "agent-refund", {"ticket": 3, "amount": 10})
    assert _approve(operator, run).status_code == 201
    run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert Step.objects.get(run=run, name="decide").result["approved_by"] == "olivia"


def test_a_wait_may_let_submitters_signal_it(submitter):
    run = _submitted_by(submitter, "submitter-nudge", {})
    response = token_client(submitter).post(
        f"/api/runs/{run.id}/signals/nudge/", {"payload": {"go": True}}, format="json"
    )
    assert response.status_code == 201, response.content


def test_a_viewer_sends_no_signal(viewer, operator):
    run = _submitted_by(operator, "submitter-nudge", {})
    error_of(
        token_client(viewer).post(f"/api/runs/{run.id}/signals/nudge/", {}, format="json"),
        403,
        "permission_denied",
    )


def test_the_engine_refuses_a_submitters_approval_whatever_the_way_in(submitter):
    run = _submitted_by(submitter, "agent-refund", {"ticket": 4, "amount": 10})
    with pytest.raises(SignalNotAllowed):
        engine.send_signal(
            run_id=run.id, name="approval", payload={"approved": True}, actor=submitter
        )


def test_the_run_records_and_shows_who_submitted_it_and_who_signalled(submitter, operator, client):
    run = _submitted_by(submitter, "agent-refund", {"ticket": 5, "amount": 10})
    assert (run.submitted_by, run.submitted_via) == ("user:sam", "api-token")
    assert _approve(operator, run).status_code == 201

    client.force_login(operator)
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "submitted by" in page and "sam (API token)" in page
    signals = page[page.index('id="signals"') :]
    assert "approval" in signals and "from olivia" in signals


def _submitted_on_the_page(client, data: dict) -> Run:
    response = client.post(
        "/runs/new/",
        {"workflow": "agent-refund", "version": "1", **{f"input.{k}": v for k, v in data.items()}},
    )
    assert response.status_code == 302, response.content
    run = Run.objects.get(pk=response["Location"].strip("/").rsplit("/", 1)[1])
    run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.WAITING
    return run


def test_the_run_page_refuses_an_approval_by_its_submitter_beside_the_form(operator_client):
    run = _submitted_on_the_page(operator_client, {"ticket": 6, "amount": 10})
    assert (run.submitted_by, run.submitted_via) == ("user:olivia", "page")

    response = operator_client.post(
        f"/runs/{run.id}/signal/",
        {"name": "approval", "payload": '{"approved": true}'},
        HTTP_HX_REQUEST="true",
    )

    assert response.status_code == 409
    form = response.content.decode()
    assert form.lstrip().startswith('<form id="signal-approval-form"')
    assert (
        f"signal &#x27;approval&#x27; is an approval: it needs someone other than olivia, "
        f"who submitted run {run.id}; nothing was sent." in form
    )
    assert "{&quot;approved&quot;: true}" in form  # what was typed is kept
    assert not Signal.objects.filter(run=run).exists()
    assert Step.objects.get(run=run, name="approval").status == StepStatus.WAITING


def _signal_command(run: Run, *args: str) -> None:
    call_command("send_signal", str(run.id), "approval", "--payload", '{"approved": true}', *args)


def test_send_signal_command_refuses_an_approval_by_the_runs_submitter(operator_client):
    run = _submitted_on_the_page(operator_client, {"ticket": 7, "amount": 10})

    with pytest.raises(CommandError, match="needs someone other than olivia"):
        _signal_command(run, "--actor", "olivia")

    assert not Signal.objects.filter(run=run).exists()


def test_send_signal_command_needs_an_account_and_checks_its_role(operator_client, viewer):
    """The command line signs with an account, checked as the pages and the API check
    it: a bare name, or none, cannot pass for someone other than the submitter."""
    run = _submitted_on_the_page(operator_client, {"ticket": 8, "amount": 10})

    with pytest.raises(CommandError, match="--actor"):
        _signal_command(run)
    with pytest.raises(CommandError, match="no active account named 'cli:olivia'"):
        _signal_command(run, "--actor", "cli:olivia")
    with pytest.raises(CommandError, match="is sent by operators only; victor may not send it"):
        _signal_command(run, "--actor", "victor")
    assert not Signal.objects.filter(run=run).exists()

    make_user("oscar", "operators")
    _signal_command(run, "--actor", "oscar")
    assert list(Signal.objects.filter(run=run).values_list("actor", flat=True)) == ["oscar"]


def test_a_run_submitted_from_the_command_line_is_approved_by_a_named_operator(operator):
    make_user("sam", "submitters")
    args = ("agent-refund", "--input", '{"ticket": 9, "amount": 10}', "--actor", "sam")
    call_command("submit_run", *args)
    run = Run.objects.get(workflow="agent-refund")
    run_queued(run)
    assert (run.submitted_by, Run.objects.get(pk=run.id).status) == ("user:sam", RunStatus.WAITING)

    with pytest.raises(CommandError):
        _signal_command(run)  # the shell is nobody in particular: maybe its submitter
    _signal_command(run, "--actor", "olivia")

    assert list(Signal.objects.filter(run=run).values_list("actor", flat=True)) == ["olivia"]


def test_the_engine_checks_a_signaller_named_by_its_username_as_that_account(viewer, operator):
    run = engine.submit_run(workflow="submitter-nudge", input={})
    run_queued(run)

    with pytest.raises(SignalNotAllowed, match="victor may not send it"):
        engine.send_signal(run_id=run.id, name="nudge", payload=None, actor="victor")
    assert not Signal.objects.filter(run=run).exists()

    engine.send_signal(run_id=run.id, name="nudge", payload=None, actor="olivia")
    assert list(Signal.objects.filter(run=run).values_list("actor", flat=True)) == ["olivia"]
