"""A run's deadline against real worker processes (docs/authoring.md#deadlines): a
run whose compensable step completed and whose next step is still running at the
deadline is ended by the beat's sweep as a cancel would end it; the running step
finishes and is recorded, the step after it never starts, and the compensation runs
once although the deadline has passed."""

from __future__ import annotations

import pytest

from examples.models import FundsHold
from runs import engine
from runs.models import Attempt, Claim, Event, Step
from runs.record import events
from runs.states import AttemptStatus, ClaimStatus, RunStatus, StepStatus
from tests.support.deadline_workflows import DEADLINE
from tests.support.waiting import wait_for

from .helpers import wait_settled

pytestmark = [pytest.mark.workers]


def test_a_deadline_ends_a_run_with_its_compensations(cluster):
    # Two solo workers: one runs `slow` through the deadline, the other the sweeps the
    # beat sends and then the compensation.
    cluster.worker()
    cluster.worker()
    cluster.beat()
    run = engine.submit_run(workflow="deadline-order", input={})

    run = wait_settled(run, cluster, timeout=DEADLINE + 60)

    assert run.status == RunStatus.CANCELLED, cluster.logs()
    assert run.error.startswith("cancelled by engine: deadline passed (deadline "), run.error
    # The run can end (its compensation done) before `slow`, which was running at the
    # deadline, sees it and records its finish: that comes within one of its polls.
    wait_for(
        lambda: not Step.objects.filter(run=run, key="slow", status=StepStatus.RUNNING).exists(),
        what="`slow`, running at the deadline, to finish",
        on_timeout=cluster.logs,
    )
    steps = dict(Step.objects.filter(run=run).values_list("key", "status"))
    assert steps == {
        "hold": StepStatus.SUCCEEDED,
        # Running at the deadline: not stopped, it finished and was recorded.
        "slow": StepStatus.SUCCEEDED,
        "ship": StepStatus.PENDING,  # never started
        "release": StepStatus.SUCCEEDED,  # started past the deadline: it undoes `hold`
    }
    # `slow` saw its run ended (compensating, or cancelled already if `release` ran
    # within its poll) and then finished: its attempt outlived the deadline's sweep.
    (slow,) = Attempt.objects.filter(run=run, step__key="slow")
    assert slow.status == AttemptStatus.SUCCEEDED
    assert Step.objects.get(run=run, key="slow").result["run_was"] in ("compensating", "cancelled")
    assert not Attempt.objects.filter(run=run, step__key="ship").exists()
    (release,) = Attempt.objects.filter(run=run, step__key="release")
    assert release.status == AttemptStatus.SUCCEEDED
    assert list(
        Claim.objects.filter(run=run, step__key__in=["hold", "release"])
        .order_by("id")
        .values_list("step__key", "status")
    ) == [("hold", ClaimStatus.SUCCEEDED), ("release", ClaimStatus.SUCCEEDED)]
    # The compensation's effect happened once: the one hold, released.
    (placed,) = FundsHold.objects.filter(run_id=run.id)
    assert placed.released_at is not None
    types = list(Event.objects.filter(run=run).values_list("type", flat=True))
    assert types.count(events.RUN_DEADLINE_PASSED) == 1
    assert types.count(events.RUN_COMPENSATING) == 1
    passed = Event.objects.get(run=run, type=events.RUN_DEADLINE_PASSED)
    assert passed.payload == {"deadline": run.deadline_at.isoformat(), "status": "running"}
    assert slow.started_at < run.deadline_at <= passed.created_at <= slow.finished_at
