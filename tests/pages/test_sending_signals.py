"""Sending signals from the run page (operators) and the API (operators, and submitters
where a wait allows them: tests/api/test_signal_permissions.py): thin edges over
engine.send_signal, refusals in the API's error shape."""

from __future__ import annotations

import pytest

from runs.models import Event, Run, Signal, Step
from runs.testing import run_inline
from tests.support.api import token_client

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def waiting(db) -> Run:
    run = run_inline("queued-signals")
    assert run.status == "waiting"
    return run


def test_operator_sees_the_signal_form_and_sends_it(operator_client, waiting):
    page = operator_client.get(f"/runs/{waiting.id}/").content.decode()
    assert "Send signal “tick”…" in page
    response = operator_client.post(
        f"/runs/{waiting.id}/signal/", {"name": "tick", "payload": '{"ok": 1}'}, **HTMX
    )
    assert response.status_code == 200
    [signal] = Signal.objects.filter(run=waiting)
    assert (signal.payload, signal.actor) == ({"ok": 1}, "olivia")
    assert Step.objects.get(run=waiting, name="first_tick").status == "queued"
    [event] = Event.objects.filter(run=waiting, type="signal_received")
    assert event.payload["actor"] == "olivia"


def test_page_refuses_bad_json_and_viewers(operator_client, waiting, client, viewer):
    operator_client.post(f"/runs/{waiting.id}/signal/", {"name": "tick", "payload": "{nope"})
    assert not Signal.objects.exists()
    client.force_login(viewer)
    assert "Send signal" not in client.get(f"/runs/{waiting.id}/").content.decode()
    response = client.post(f"/runs/{waiting.id}/signal/", {"name": "tick"})
    assert response.status_code == 403
    assert not Signal.objects.exists()


def test_api_signal_for_submitters_and_operators_refusals_in_error_shape(
    waiting, submitter, viewer, operator
):
    url = f"/api/runs/{waiting.id}/signals/tick/"
    assert token_client(viewer).post(url, {}, format="json").status_code == 403
    # Not its run (a submitter reads only its own runs): as if there were none.
    assert token_client(submitter).post(url, {}, format="json").status_code == 404
    response = token_client(operator).post(url, {"payload": [1, 2]}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["payload"] == [1, 2] and response.json()["actor"] == "olivia"
    response = token_client(operator).post(
        f"/api/runs/{waiting.id}/signals/nope/", {"payload": 1}, format="json"
    )
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"
    assert "waits for 'tick'" in response.json()["error"]["message"]
    assert Signal.objects.count() == 1


def test_api_refuses_a_duplicate_and_a_finished_run(db, operator):
    run = run_inline("wait-approval", input={"order": 1}, signals={"approval": "yes"})
    assert run.status == "succeeded"
    url = f"/api/runs/{run.id}/signals/approval/"
    response = token_client(operator).post(url, {"payload": "again"}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "run_not_active"

    from runs import engine

    fresh = engine.submit_run(workflow="wait-approval", input={"order": 2})
    url = f"/api/runs/{fresh.id}/signals/approval/"
    assert token_client(operator).post(url, {"payload": 1}, format="json").status_code == 201
    response = token_client(operator).post(url, {"payload": 2}, format="json")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "duplicate_signal"
    assert list(Signal.objects.filter(run=fresh).values_list("payload", flat=True)) == [1]


def test_an_approval_is_not_offered_to_the_runs_submitter_but_why(client, operator):
    """The engine refuses an approval (a `four_eyes` wait) from the run's submitter; the
    page asks the engine's rule (engine.signal_refusal) and says why in place of the
    button, and offers it to another operator."""
    from runs import engine
    from runs.principals import Principal
    from tests.conftest import make_user
    from tests.support.factories import run_queued

    run = engine.submit_run(
        workflow="agent-refund",
        input={"ticket": 5, "amount": 10},
        by=Principal.of_user(operator, "web"),
    )
    run_queued(run)  # proposes, holds the funds, then waits for the approval
    assert Step.objects.get(run=run, name="approval").status == "waiting"

    client.force_login(operator)
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "Send signal “approval”" not in page
    assert 'id="signal-approval-form"' not in page
    assert "You submitted this run: another operator approves it (“approval”)." in page

    client.force_login(make_user("oscar", "operators"))
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "Send signal “approval”…" in page
    assert "You submitted this run" not in page
