"""Concurrency limits and key holds against real worker processes
(docs/authoring.md#limits-and-holds): 50 runs of a step limited to 3 never run more
than 3 at once, with a worker SIGKILLed in the middle and no slot lost; a per-key limit
serialises one change and lets another pass; an unresolved claim holds its key's merge
in another run until a person decides."""

from __future__ import annotations

import signal
import time
from datetime import datetime

import pytest

from runs import engine
from runs.models import Attempt, Claim, Run, Slot, Step
from runs.states import AttemptStatus, ClaimStatus, RunStatus, StepStatus
from tests.support.waiting import wait_for

from .helpers import wait_settled

pytestmark = [pytest.mark.workers]

PREFORK = ("-P", "prefork", "-c", "2")


def _most_at_once(intervals: list[tuple[float, float]]) -> int:
    """The largest number of intervals that overlap at one instant."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = now = 0
    for _, step in edges:  # an end sorts before a start at the same instant
        now += step
        most = max(most, now)
    return most


def _ran(step: Step) -> tuple[float, float]:
    return (step.result["began"], step.result["ended"])


def test_fifty_runs_of_a_step_limited_to_3_never_run_4_at_once_through_a_sigkill(cluster):
    doomed = cluster.worker(pool=PREFORK)
    cluster.worker(pool=PREFORK)  # 4 processes for 3 slots: the limit, not the pool, binds
    cluster.beat()
    runs = [engine.submit_run(workflow="limited-three", input={"seconds": 0.3}) for _ in range(50)]
    wait_for(
        lambda: (
            Run.objects.filter(pk__in=[r.pk for r in runs], status=RunStatus.SUCCEEDED).count()
            >= 10
        ),
        timeout=120,
        what="ten runs done before the kill",
        on_timeout=cluster.logs,
    )
    killed_at = time.time()
    doomed.signal(signal.SIGKILL)  # its pool's children too: their attempts die running
    doomed.wait_exit()

    settled = [wait_settled(run, cluster, timeout=240) for run in runs]

    assert {run.status for run in settled} == {RunStatus.SUCCEEDED}, cluster.logs()
    steps = list(Step.objects.filter(run__in=runs))
    attempts = Attempt.objects.filter(step__in=steps)
    crashed = list(attempts.filter(status=AttemptStatus.CRASHED))
    # Every succeeded attempt ran its function once; a killed one ran from its start
    # until the kill (its slot stayed taken until the sweeper recovered it).
    intervals = [_ran(step) for step in steps] + [
        (a.started_at.timestamp(), killed_at) for a in crashed
    ]
    assert _most_at_once(intervals) == 3, sorted(intervals)
    assert attempts.filter(status=AttemptStatus.SUCCEEDED).count() == 50
    # Nothing waits for a slot, and no slot is held by an attempt that is not running.
    assert Step.objects.filter(run__in=runs).exclude(waiting_for="").count() == 0
    assert Slot.objects.filter(attempt__status=AttemptStatus.RUNNING).count() == 0


def test_a_limit_per_change_serialises_one_change_and_lets_another_pass(cluster):
    cluster.worker(pool=PREFORK)
    cluster.worker(pool=PREFORK)
    cluster.beat()
    first, second, other = (
        engine.submit_run(workflow="one-per-change", input={"change_id": c, "seconds": 1.5})
        for c in (301, 301, 302)
    )

    done = [wait_settled(run, cluster, timeout=90) for run in (first, second, other)]

    assert {run.status for run in done} == {RunStatus.SUCCEEDED}, cluster.logs()
    a, b, c = (_ran(Step.objects.get(run=run)) for run in (first, second, other))
    one, two = sorted([a, b])
    assert one[1] <= two[0], (a, b)  # change 301: one after the other
    assert _most_at_once([a, b, c]) == 2  # change 302 ran beside one of them


def test_an_unresolved_merge_holds_its_change_in_another_run_until_a_person_decides(cluster):
    worker = cluster.worker()
    cluster.beat()
    unknown = engine.submit_run(workflow="held-merge", input={"change_id": 301, "answers": False})
    assert wait_settled(unknown, cluster).status == RunStatus.NEEDS_RECONCILIATION
    second = engine.submit_run(workflow="held-merge", input={"change_id": 301, "answers": True})
    merge = Step.objects.get(run=second)
    wait_for(
        lambda: Step.objects.filter(pk=merge.pk, waiting_for="hold change_id=301").exists(),
        what="the second merge to be held",
        on_timeout=cluster.logs,
    )
    # Sweeps come and go (every 0.5 s) and leave it held: no attempt, no message loop.
    swept = worker.output().count("Task runs.sweep[")
    wait_for(lambda: worker.output().count("Task runs.sweep[") >= swept + 6, what="three sweeps")
    merge.refresh_from_db()
    assert (merge.status, merge.attempts) == (StepStatus.QUEUED, 0)

    decided_at = datetime.now().astimezone()
    engine.resolve_claim(
        Claim.objects.get(run=unknown), ClaimStatus.FAILED, actor="ann", note="not merged"
    )

    assert wait_settled(second, cluster).status == RunStatus.SUCCEEDED, cluster.logs()
    (attempt,) = Attempt.objects.filter(step=merge)
    assert attempt.started_at >= decided_at


@pytest.mark.soak
def test_a_rate_of_5_a_second_holds_within_10_percent_over_a_minute_on_4_processes(cluster):
    cluster.worker(pool=PREFORK)
    cluster.worker(pool=PREFORK)
    cluster.beat()
    runs = [engine.submit_run(workflow="paced", input={}) for _ in range(360)]

    wait_for(
        lambda: (
            Run.objects.filter(pk__in=[r.pk for r in runs], status=RunStatus.SUCCEEDED).count()
            == len(runs)
        ),
        timeout=180,
        what="360 runs at 5 starts a second",
        on_timeout=cluster.logs,
    )

    starts = sorted(
        Attempt.objects.filter(run__in=runs, status=AttemptStatus.SUCCEEDED).values_list(
            "started_at", flat=True
        )
    )
    first = starts[0]
    in_a_minute = sum(1 for at in starts if (at - first).total_seconds() < 60)
    assert 270 <= in_a_minute <= 330, in_a_minute
    # Never a burst: no second of the run saw more than 5 starts (+1 at its edge).
    busiest = max(
        sum(1 for at in starts if 0 <= (at - start).total_seconds() < 1) for start in starts
    )
    assert busiest <= 6, busiest
