"""Prometheus multiprocess directories of real workers (config/celery.py,
docs/operating.md#metrics-of-worker-processes): a worker started without
PROMETHEUS_MULTIPROC_DIR makes its own and removes it when it stops; one the environment
gives is never removed; the live gauges of pool children that exited (recycled by
--max-tasks-per-child, or killed outright) leave with them, so sums count only children
that run."""

from __future__ import annotations

import os
import re
import signal
from pathlib import Path

import pytest

from runs import engine
from runs.models import Run, WorkerProcess
from runs.states import RunStatus
from tests.support.waiting import wait_for

pytestmark = pytest.mark.workers

LIVE_GAUGE = re.compile(r"gauge_live\w*?_(\d+)\.db$")
PREFORK = ("-P", "prefork", "-c", "2", "--max-tasks-per-child=1")
# A message per step (none started by the worker itself), so children recycle often.
ONE_STEP_PER_TASK = {"RUNS_DIRECT_SUCCESSORS": "0", "RUNS_WORKER_HEARTBEAT_SECONDS": "0.25"}


def live_gauge_pids(directory: Path) -> list[int]:
    return sorted(int(m[1]) for f in directory.iterdir() if (m := LIVE_GAUGE.search(f.name)))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_worker_removes_the_directory_it_made_when_it_stops(cluster, tmp_path):
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    env = {"TMPDIR": str(own_tmp)}
    proc = cluster.worker(**env, PROMETHEUS_MULTIPROC_DIR="")
    [made] = list(own_tmp.glob("durable-runs-metrics-*"))
    assert made.is_dir()

    proc.terminate()
    assert proc.wait_exit(timeout=30) == 0, proc.tail()
    assert not made.exists()


def test_prefork_children_leave_no_live_gauges_behind_and_a_given_directory_stays(
    cluster, tmp_path
):
    given = tmp_path / "metrics"
    given.mkdir()
    proc = cluster.worker(pool=PREFORK, PROMETHEUS_MULTIPROC_DIR=str(given), **ONE_STEP_PER_TASK)
    runs = [engine.submit_run(workflow="pure-chain", input={}) for _ in range(3)]
    wait_for(
        lambda: (
            Run.objects.filter(pk__in=[r.pk for r in runs], status=RunStatus.SUCCEEDED).count() == 3
        ),
        what="three runs to succeed",
        on_timeout=cluster.logs,
    )
    # Six tasks, one per child: at least four children have come and gone. Live gauges
    # are left by the pool's children and the main process (which holds the gauge at 0).
    row = WorkerProcess.objects.get(pid=proc.popen.pid)

    def running() -> set[int]:
        return {proc.popen.pid, *WorkerProcess.objects.get(pk=row.pk).pool_pids}

    def only_live_processes() -> bool:
        # One reading of the directory, judged whole: the last child to run a task exits
        # (recycled) after its step committed, and the parent removes its file a moment
        # later, so two separate reads could see a file of a child just gone.
        pids = live_gauge_pids(given)
        return set(pids) <= running() and all(alive(p) for p in pids) and len(pids) <= 3

    wait_for(
        only_live_processes,
        what="only the pool's live children and the main process to have live gauges",
        on_timeout=lambda: (
            f"files: {sorted(f.name for f in given.iterdir())}\n"
            f"pool: {WorkerProcess.objects.get(pk=row.pk).pool_pids}\n{cluster.logs()}"
        ),
    )
    counted = list(given.glob("counter_*.db"))
    assert len(counted) >= 4, "the dead children's counts stay"

    # A child killed outright runs no shutdown signal: the parent marks it dead.
    victim = wait_for(
        lambda: next((p for p in live_gauge_pids(given) if p != proc.popen.pid and alive(p)), None),
        what="a child's live gauge",
    )
    os.kill(victim, signal.SIGKILL)
    wait_for(lambda: victim not in live_gauge_pids(given), what="the killed child's gauge to go")

    proc.terminate()
    assert proc.wait_exit(timeout=30) == 0, proc.tail()
    assert given.is_dir() and counted[0].exists(), "a directory given is never removed"
    assert live_gauge_pids(given) == []
