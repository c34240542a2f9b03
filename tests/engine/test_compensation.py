"""Compensation: reverse order of completion, cancelled vs failed endings, an
unresolved compensation in the reconciliation queue."""

from __future__ import annotations

import pytest

from reconciliation import queries
from reconciliation.incidents import ClaimFilter
from runs import engine
from runs.errors import StepNotRetryable
from runs.models import Claim, Event, Run, Step
from runs.testing import run_inline

pytestmark = pytest.mark.django_db


def _order(run: Run) -> list[str]:
    """The compensations in the order they succeeded (by event seq)."""
    return [
        e.payload["step"]
        for e in Event.objects.filter(run=run, type="step_succeeded").order_by("seq")
        if e.payload["step"] in ("release", "refund")
    ]


def test_a_failed_run_compensates_in_reverse_order_then_ends_failed():
    run = run_inline("compensated-order", input={"outcome": "fail"})
    assert run.status == "failed"
    assert "the order cannot be completed" in run.error
    assert _order(run) == ["refund", "release"]  # charge completed last: undone first
    [began] = Event.objects.filter(run=run, type="run_compensating")
    assert began.payload["compensations"] == ["refund", "release"]
    assert began.payload["ends_as"] == "failed"
    assert run.results["refund"] == {"refunded": 100}
    assert run.results["release"] == {"released": "seat-1"}
    refund = Step.objects.get(run=run, name="refund")
    assert refund.compensates == "charge" and refund.kind == "guarded"
    assert Claim.objects.get(step=refund).status == "succeeded"  # its own claim
    assert run.step_statuses["finish"] == "failed"


def test_a_succeeding_run_compensates_nothing():
    run = run_inline("compensated-order", input={"outcome": "ok"})
    assert run.status == "succeeded"
    assert not Step.objects.filter(run=run, compensates__gt="").exists()
    assert run.step_statuses["go"] == "skipped"


def test_a_cancelled_run_compensates_then_ends_cancelled():
    run = run_inline("compensated-order", input={"outcome": "wait"})
    assert run.status == "waiting"
    cancelled = engine.cancel_run(run_id=run.id, actor="ada", reason="customer left")
    assert cancelled.status == "compensating"
    run = cancelled
    from runs.testing import on_commit_callbacks_run

    for _ in range(2):
        for step in Step.objects.filter(run=run, status="queued"):
            with on_commit_callbacks_run():
                engine.execute_step(step_id=step.id, worker="test")
    run.refresh_from_db()
    assert run.status == "cancelled"
    assert run.error == "cancelled by ada: customer left"
    assert _order(run) == ["refund", "release"]
    assert Step.objects.get(run=run, name="go").status == "waiting"  # never woken


def test_an_unresolved_compensation_goes_to_the_queue_and_the_run_waits_for_it():
    run = run_inline("compensated-order", input={"outcome": "fail", "undo": "uncertain"})
    assert run.status == "compensating"  # waits for a decision on the refund
    claim = Claim.objects.get(step__run=run, step__name="refund")
    assert claim.status == "unresolved"
    queue = queries.unresolved_queue(ClaimFilter(workflow="compensated-order").claims())
    assert [(row.claim_id, row.run_status) for row in queue[0:10]] == [(claim.pk, "compensating")]
    assert Step.objects.get(run=run, name="release").status == "pending"

    from runs.testing import on_commit_callbacks_run

    with on_commit_callbacks_run():
        engine_resolve(claim.id)
    for step in Step.objects.filter(run=run, status="queued"):
        with on_commit_callbacks_run():
            engine.execute_step(step_id=step.id, worker="test")
    run.refresh_from_db()
    assert run.status == "failed"
    assert _order(run) == ["refund", "release"]


def engine_resolve(claim_id: int) -> None:
    from runs.engine import resolve_claim

    resolve_claim(
        claim_id,
        "succeeded",
        actor="olivia",
        note="refund seen in the payment dashboard",
        result={"refunded": 100},
    )


def test_run_pages_show_compensating_skipped_and_waiting_runs(operator_client):
    waiting = run_inline("compensated-order", input={"outcome": "wait"})
    compensating = run_inline("compensated-order", input={"outcome": "fail", "undo": "uncertain"})
    skipped = run_inline("compensated-order", input={"outcome": "ok"})
    for run, words in (
        (waiting, ["waiting", "Send signal “go”…"]),
        (compensating, ["compensating", "refund", "release"]),
        (skipped, ["skipped"]),
    ):
        page = operator_client.get(f"/runs/{run.id}/")
        assert page.status_code == 200
        text = page.content.decode()
        for word in words:
            assert word in text, (run.status, word)
    listing = operator_client.get("/runs/?status=compensating").content.decode()
    assert str(compensating.id) in listing
    assert operator_client.get("/").status_code == 200


def test_a_failed_compensation_ends_the_run_failed_and_a_retry_resumes_compensating():
    from unittest import mock

    from tests.support import workflows

    def refund_fails(ctx):
        raise workflows.NotApplied("the payment API refused the refund")

    spec = workflows.compensated.compensations["refund"]
    with mock.patch.object(spec, "fn", refund_fails):
        run = run_inline("compensated-order", input={"outcome": "fail"})
    assert run.status == "failed"
    assert "step refund failed" in run.error
    assert Step.objects.get(run=run, name="release").status == "pending"
    with pytest.raises(StepNotRetryable, match="no failed step finish"):
        engine.retry_steps(run_id=run.id, step_keys=["finish"], actor="ada")

    reopened = engine.retry_steps(run_id=run.id, step_keys=["refund"], actor="ada")
    assert reopened.status == "compensating"
    from runs.testing import on_commit_callbacks_run

    for _ in range(3):
        for step in Step.objects.filter(run=run, status="queued"):
            with on_commit_callbacks_run():
                engine.execute_step(step_id=step.id, worker="test")
    run.refresh_from_db()
    assert run.status == "failed"  # as it was ending, now fully compensated
    assert _order(run) == ["refund", "release"]
