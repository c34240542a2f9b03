"""A step that names a compensation and turns out to have succeeded after its run
stopped (a resolution decides it did) is undone like the others: its run compensates
again, and ends as it was ending."""

from __future__ import annotations

import pytest

from reconciliation.services import resolve_claim
from runs import engine, events
from runs.models import Claim, Event, Run, Step
from runs.states import ClaimStatus, RunStatus, StepStatus
from runs.testing import _commits, run_inline

pytestmark = pytest.mark.django_db


def _compensations(run: Run) -> dict[str, str]:
    return dict(Step.objects.filter(run=run).exclude(compensates="").values_list("name", "status"))


def _drive(run: Run) -> Run:
    while step := Step.objects.filter(run=run, status=StepStatus.QUEUED).first():
        with _commits():
            engine.execute_step(step_id=step.id, worker="t")
    run.refresh_from_db()
    return run


def test_a_guarded_step_resolved_succeeded_after_its_run_was_cancelled_is_compensated():
    run = run_inline("compensated-deploy")
    assert run.status == RunStatus.NEEDS_RECONCILIATION
    claim = Claim.objects.get(run=run)
    with _commits():
        assert engine.cancel_run(run_id=run.id, actor="ann").status == RunStatus.CANCELLED

    with _commits():
        resolve_claim(claim.id, ClaimStatus.SUCCEEDED, actor="ann", note="it deployed")

    run.refresh_from_db()
    assert (run.status, run.ends_as) == (RunStatus.COMPENSATING, RunStatus.CANCELLED)
    assert _compensations(run) == {"roll_back": StepStatus.QUEUED}
    began = Event.objects.filter(run=run, type=events.RUN_COMPENSATING).last()
    assert began.payload["compensations"] == ["roll_back"]
    run = _drive(run)
    assert run.status == RunStatus.CANCELLED
    assert run.error.startswith("cancelled by ann")
    assert _compensations(run) == {"roll_back": StepStatus.SUCCEEDED}
    assert Step.objects.get(run=run, name="announce_release").status == StepStatus.PENDING


def test_a_guarded_step_resolved_failed_after_its_run_was_cancelled_needs_no_undo():
    run = run_inline("compensated-deploy")
    claim = Claim.objects.get(run=run)
    with _commits():
        engine.cancel_run(run_id=run.id, actor="ann")
        resolve_claim(claim.id, ClaimStatus.FAILED, actor="ann", note="it never deployed")
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert _compensations(run) == {}
