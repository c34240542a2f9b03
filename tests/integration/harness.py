"""Real Celery processes for integration tests.

Workers run the solo pool, so a task runs in the worker's main process and a
fault-injected SIGKILL kills the whole worker, as an OOM kill would. Engine timings
are shortened through the environment (lease, sweep interval, republish bound) so
recovery happens within seconds; tests wait on database state, never on sleeps.
"""

from __future__ import annotations

import os
from pathlib import Path

from django.conf import settings

from runs.tools.processes import (
    BEAT_READY,
    WORKER_READY,
    ChildProcess,
    celery_beat_args,
    celery_worker_args,
    stop_all,
)
from tests.support.places import database_url_for_tests

FAST_TIMINGS = {
    "RUNS_LEASE_SECONDS": "2",
    "RUNS_SWEEP_INTERVAL": "0.5",
    "RUNS_REPUBLISH_AFTER_SECONDS": "3",
    "RUNS_PROBE_GRACE_SECONDS": "1",
    # The unit tests turn the sweeper's back-off off (tests/support/session_env.py); a
    # cluster's queues are purged at its start, so its workers read a true depth.
    "RUNS_REPUBLISH_BACKOFF": "1",
}


# Tests use the same child-process handling as `manage.py crashcheck`.
Process = ChildProcess


class Cluster:
    """The worker and beat processes of one test."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.processes: list[Process] = []

    def env(self, **overrides: str) -> dict[str, str]:
        env = dict(os.environ)
        env.update(FAST_TIMINGS)
        env.update(
            DATABASE_URL=database_url_for_tests(),
            CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
            RUNS_QUEUE=settings.CELERY_TASK_DEFAULT_QUEUE,
            PYTHONUNBUFFERED="1",
        )
        env.pop("RUNS_FAULTS", None)
        env.pop("RUNS_ALLOW_FAULTS", None)
        env.update(overrides)
        return env

    def worker(
        self,
        *,
        faults: str | None = None,
        wait: bool = True,
        pool: tuple[str, ...] = ("-P", "solo"),
        **env: str,
    ) -> Process:
        """Start a real worker; `faults` is a RUNS_FAULTS spec (enables fault injection),
        `pool` the pool's options (solo unless told)."""
        if faults is not None:
            env = {**env, "RUNS_ALLOW_FAULTS": "1", "RUNS_FAULTS": faults}
        n = len(self.processes)
        proc = Process(
            f"worker{n}",
            celery_worker_args(f"w{n}-{os.getpid()}@%h", pool),
            self.env(**env),
            self.tmp / f"worker{n}.log",
        )
        self.processes.append(proc)
        if wait:
            proc.wait_ready(WORKER_READY)
        return proc

    def beat(self, **env: str) -> Process:
        """Celery beat, scheduling the recovery sweep every RUNS_SWEEP_INTERVAL."""
        n = len(self.processes)
        proc = Process(
            f"beat{n}",
            celery_beat_args(self.tmp / f"beat{n}-schedule"),
            self.env(**env),
            self.tmp / f"beat{n}.log",
        )
        self.processes.append(proc)
        proc.wait_ready(BEAT_READY)
        return proc

    def logs(self) -> str:
        return "\n".join(f"===== {p.name} =====\n{p.output()[-4000:]}" for p in self.processes)

    def stop_all(self) -> None:
        stop_all(self.processes)
