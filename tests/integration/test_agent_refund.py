"""The agent-refund example against real worker and beat processes: approval,
rejection (compensation), and a tool call crashed after its effect (settled by its
probe). tests/workflows/test_run_inline_examples.py checks that run_inline agrees."""

from __future__ import annotations

import signal

import pytest

from examples.models import FundsHold, ModelCompletion, Refund
from runs import engine
from runs.models import Claim, Step
from runs.states import RUN_FINISHED, RunStatus, StepStatus
from tests.support.waiting import wait_for

from .helpers import wait_settled

pytestmark = pytest.mark.workers


def _waits_for_approval(run) -> bool:
    return Step.objects.filter(run=run, name="approval", status=StepStatus.WAITING).exists()


def test_agent_refund_approved_refunds_once(cluster):
    cluster.worker()
    run = engine.submit_run(workflow="agent-refund", input={"ticket": 1, "amount": 30})
    wait_for(lambda: _waits_for_approval(run), what="the approval wait", on_timeout=cluster.logs)
    assert Refund.objects.count() == 0  # nothing irreversible before a person says so
    engine.send_signal(run_id=run.id, name="approval", payload={"approved": True}, actor="ann")
    run = wait_settled(run, cluster)
    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    assert Refund.objects.filter(run_id=run.id).count() == 1
    assert FundsHold.objects.get(run_id=run.id).released_at is None
    assert ModelCompletion.objects.get(idempotency_key__startswith=f"{run.id}/").requests == 1


def test_agent_refund_rejected_releases_the_hold(cluster):
    cluster.worker()
    run = engine.submit_run(workflow="agent-refund", input={"ticket": 2, "amount": 30})
    wait_for(lambda: _waits_for_approval(run), what="the approval wait", on_timeout=cluster.logs)
    engine.send_signal(run_id=run.id, name="approval", payload={"approved": False}, actor="ann")
    run = wait_settled(run, cluster, until=RUN_FINISHED)
    assert run.status == RunStatus.FAILED, cluster.logs()
    assert "refund rejected by ann" in run.error
    assert Refund.objects.filter(run_id=run.id).count() == 0
    assert FundsHold.objects.get(run_id=run.id).released_at is not None
    release = Step.objects.get(run=run, name="release_hold")
    assert (release.status, release.compensates) == (StepStatus.SUCCEEDED, "hold_funds")
    assert Claim.objects.get(step=release).status == "succeeded"


def test_agent_refund_tool_crash_is_settled_by_its_probe(cluster):
    doomed = cluster.worker(faults="after_effect:hold_funds")
    cluster.beat()
    run = engine.submit_run(workflow="agent-refund", input={"ticket": 3, "amount": 30})
    assert doomed.wait_exit() == -signal.SIGKILL
    cluster.worker()
    wait_for(lambda: _waits_for_approval(run), what="the approval wait", on_timeout=cluster.logs)
    engine.send_signal(run_id=run.id, name="approval", payload={"approved": True}, actor="ann")
    run = wait_settled(run, cluster, until=RUN_FINISHED)
    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    assert FundsHold.objects.filter(run_id=run.id).count() == 1  # the hold was not repeated
    assert Refund.objects.filter(run_id=run.id).count() == 1
    first = Claim.objects.filter(step__name="hold_funds", run=run).order_by("id").first()
    assert first.resolved_by == "probe"
