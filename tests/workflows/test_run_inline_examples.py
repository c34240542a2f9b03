"""runs.testing.run_inline over every example workflow, without and with each fault
point on each step, checked against what the real-worker tests assert for the same
crash (tests/integration/test_crash_safety.py, test_crashcheck.py,
test_agent_refund.py): the harness must agree with real processes on the outcome."""

from __future__ import annotations

from typing import Any

import pytest

from examples.models import FundsHold, Merge, ModelCompletion, PaymentCharge, Refund, TargetRecord
from runs.engine import tools
from runs.models import Claim, Run
from runs.testing import run_inline
from runs.workflows import registry

pytestmark = pytest.mark.django_db

APPROVE = {"approval": {"approved": True}}

# workflow -> (input, signals, how to count its external effects for a run)
EXAMPLES: dict[str, tuple[dict[str, Any], dict[str, Any], Any]] = {
    "migrate-records": (
        {"count": 20, "batch_size": 5},
        {},
        lambda run: TargetRecord.objects.filter(run_id=run.id).count(),
    ),
    "merge-change": ({"change_id": 7}, {}, lambda run: Merge.objects.filter(run_id=run.id).count()),
    "merge-change-probed": (
        {"change_id": 11},
        {},
        lambda run: Merge.objects.filter(run_id=run.id).count(),
    ),
    "charge-payment": (
        {"amount": 700},
        {},
        lambda run: PaymentCharge.objects.filter(idempotency_key__startswith=f"{run.id}/").count(),
    ),
    "agent-refund": (
        {"ticket": 3, "amount": 40},
        APPROVE,
        lambda run: Refund.objects.filter(run_id=run.id).count(),
    ),
}
EXPECTED_EFFECTS = {
    "migrate-records": 20,
    "merge-change": 1,
    "merge-change-probed": 1,
    "charge-payment": 1,
    "agent-refund": 1,
}


def expected(workflow: str, step: str, point: str | None) -> tuple[str, int]:
    """(run status, effects) that the real-worker tests assert for this crash."""
    if workflow == "merge-change" and step == "merge":
        # test_crash_matrix_guarded_merge_escalates_when_uncertain, test_crashcheck
        return {
            "before_claim": ("succeeded", 1),
            "after_claim": ("needs_reconciliation", 0),
            "after_effect": ("needs_reconciliation", 1),
            "after_commit": ("succeeded", 1),
            None: ("succeeded", 1),
        }[point]
    # Retryable kinds apply each effect once (test_crash_matrix_retryable_kinds_...);
    # guarded steps with a probe are settled by it (test_probe_resolves_without_operator,
    # test_agent_refund_tool_crash_is_settled_by_its_probe).
    return "succeeded", EXPECTED_EFFECTS[workflow]


def cases() -> list[tuple[str, str, str | None]]:
    out: list[tuple[str, str, str | None]] = [(wf, "-", None) for wf in EXAMPLES]
    for name in EXAMPLES:
        wf = registry.latest(name)
        assert wf is not None
        out += [(name, step, point) for step in wf.steps for point in tools.faults.POINTS]
    return out


def test_every_example_workflow_is_covered():
    from examples import workflows
    from runs.workflows import Workflow

    shipped = {w.name for w in vars(workflows).values() if isinstance(w, Workflow)}
    assert shipped == set(EXAMPLES)


@pytest.mark.parametrize(("workflow", "step", "point"), cases())
def test_harness_agrees_with_real_workers(workflow, step, point):
    data, signals, effects = EXAMPLES[workflow]
    faults = [f"{point}:{step}"] if point else []
    run = run_inline(workflow, input=data, faults=faults, signals=signals)
    status, count = expected(workflow, step, point)
    assert (run.status, effects(run)) == (status, count), (run.error, run.step_statuses)
    if status == "needs_reconciliation":
        assert list(Claim.objects.filter(run=run).values_list("status", flat=True)) == [
            "unresolved"
        ]
    if workflow == "agent-refund":
        # one model completion for the run, however often `propose` was retried
        assert ModelCompletion.objects.filter(idempotency_key__startswith=f"{run.id}/").count() == 1
        assert FundsHold.objects.filter(run_id=run.id).count() == 1


def test_agent_refund_rejected_releases_the_hold():
    run = run_inline(
        "agent-refund", input={"ticket": 4, "amount": 10}, signals={"approval": {"approved": False}}
    )
    assert run.status == "failed"
    assert "refund rejected by run_inline" in run.error
    assert Refund.objects.filter(run_id=run.id).count() == 0
    hold = FundsHold.objects.get(run_id=run.id)
    assert hold.released_at is not None
    assert run.step_statuses["release_hold"] == "succeeded"
    assert Run.objects.get(pk=run.id).status == "failed"


def test_agent_refund_without_a_decision_times_out_and_releases_the_hold():
    run = run_inline("agent-refund", input={"ticket": 5, "amount": 10})
    assert run.status == "failed"
    assert "before its timeout" in run.error
    assert FundsHold.objects.get(run_id=run.id).released_at is not None
