"""Guarded steps in-process: independent branches go on, inconclusive probes wait."""

from __future__ import annotations

from reconciliation.services import resolve_claim
from runs import engine
from runs.models import Claim, Event, Run, Step
from runs.record import events
from runs.states import ClaimStatus, RunStatus, StepStatus


def statuses(run: Run) -> dict[str, str]:
    return dict(Step.objects.filter(run=run).values_list("key", "status"))


def run_queued(run: Run) -> None:
    while step := Step.objects.filter(run=run, status=StepStatus.QUEUED).first():
        engine.execute_step(step_id=step.id, worker="t")


def test_unresolved_step_blocks_only_its_dependents(db):
    run = engine.submit_run(workflow="fan-out", input={})
    run_queued(run)

    run.refresh_from_db()
    assert run.status == RunStatus.NEEDS_RECONCILIATION
    assert statuses(run) == {
        "deploy": StepStatus.UNRESOLVED,
        "notify": StepStatus.SUCCEEDED,
        "announce": StepStatus.PENDING,
    }

    claim = Claim.objects.get(run=run)
    resolve_claim(claim, "succeeded", actor="ann", note="deployed", result="v42")
    run_queued(run)

    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert run.result == {"notify": "notified", "announce": "announced v42"}


def test_inconclusive_probe_leaves_claim_for_operator(db):
    run = engine.submit_run(workflow="fan-out", input={})
    run_queued(run)
    claim = Claim.objects.get(run=run)
    assert claim.probe_requested_at is not None

    assert engine.probe_claim(claim_id=claim.id) == "unknown"
    assert engine.probe_claim(claim_id=claim.id) == "skipped"  # one probe per claim

    claim.refresh_from_db()
    assert (claim.status, claim.resolved_by) == (ClaimStatus.UNRESOLVED, "")
    assert claim.probed_at is not None
    event = Event.objects.get(run=run, type=events.PROBE_INCONCLUSIVE)
    assert event.payload["evidence"] == {"reason": "code host audit log unavailable"}
