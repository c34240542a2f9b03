"""The read side of the workers page (docs/operating.md#workers-and-queues): workers as
they report themselves (runs/ops/heartbeat.py), the attempts running now, the steps waiting
for a free worker (of runs where they can start), and the depth of each Celery queue as
the broker counts it.

Three queries whatever the number of workers and attempts (tests/pages/
test_query_budgets.py), each on an index: the waiting steps' count and oldest wait with
the database's clock (step_waiting_idx), the worker rows, the running attempts
(attempt_live_lease_idx). The broker is asked over one fresh connection with the
readiness check's timeout; a broker that does not answer is said on the page.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection

from runs import engine, sql
from runs.models import Attempt, WorkerProcess
from runs.reads.limits import LimitRow, limit_rows
from runs.states import RUN_ACTIVE, AttemptStatus, ClaimStatus, RunStatus, StepStatus

SQL = sql.load(__file__)

# More running attempts than this are not listed one by one (the count still is).
ATTEMPTS_SHOWN = 500


@dataclass
class RunningAttempt:
    id: int
    run_id: uuid.UUID
    step_key: str
    number: int
    worker: str
    started_at: datetime
    lease_expires_at: datetime
    lease_expired: bool


@dataclass
class WorkerRow:
    name: str
    host: str
    pid: int
    pool_pids: list[int]
    concurrency: int
    started_at: datetime
    heartbeat_at: datetime
    attempts: list[RunningAttempt] = field(default_factory=list)
    heartbeat_stale: bool = False

    @property
    def children(self) -> list[int]:
        """The pool's processes, when they are not the main process (prefork)."""
        return [] if self.pool_pids in ([], [self.pid]) else self.pool_pids

    @property
    def silent(self) -> bool:
        return self.heartbeat_stale or any(a.lease_expired for a in self.attempts)

    @property
    def silent_since(self) -> datetime | None:
        """Its last heartbeat, if that is older than a lease; else the earliest lease of
        its attempts that expired without a renewal."""
        if self.heartbeat_stale:
            return self.heartbeat_at
        expired = [a.lease_expires_at for a in self.attempts if a.lease_expired]
        return min(expired) if expired else None


@dataclass
class QueueDepth:
    name: str
    role: str
    messages: int


@dataclass
class WorkersPage:
    now: datetime
    lease_seconds: float
    workers: list[WorkerRow]
    # Running attempts of processes no worker row names (a worker that does not
    # report: started before its row existed, or forgotten).
    unreported: list[RunningAttempt]
    running: int
    attempts_capped: bool
    waiting: int
    oldest_queued_at: datetime | None
    # Queued steps of runs going on, held back by a pause (not waiting for a worker).
    paused: int
    # Queued steps waiting for a slot of a concurrency limit or a key hold, and each
    # limit's scope with a slot in use or a step waiting (runs/reads/limits.py).
    limited: int
    limits: list[LimitRow]
    queues: list[QueueDepth]
    broker_error: str

    @property
    def oldest_wait(self) -> timedelta | None:
        return self.now - self.oldest_queued_at if self.oldest_queued_at else None

    @property
    def silent(self) -> int:
        return sum(1 for w in self.workers if w.silent)


def _waiting() -> tuple[datetime, int, datetime | None, int, int]:
    with connection.cursor() as cursor:
        cursor.execute(
            SQL["waiting"],
            {
                "queued": StepStatus.QUEUED.value,
                "retrying": StepStatus.RETRYING.value,
                "active": [str(status) for status in RUN_ACTIVE],
                "compensating": [RunStatus.COMPENSATING.value],
            },
        )
        now, count, oldest, paused, limited = cursor.fetchone()
    return now, int(count), oldest, int(paused), int(limited)


def _limits() -> list[LimitRow]:
    with connection.cursor() as cursor:
        cursor.execute(
            SQL["limits"],
            {
                "running": AttemptStatus.RUNNING.value,
                "queued": StepStatus.QUEUED.value,
                "retrying": StepStatus.RETRYING.value,
                "unresolved": ClaimStatus.UNRESOLVED.value,
            },
        )
        return limit_rows(cursor.fetchall())


def queue_depths() -> tuple[list[QueueDepth], str]:
    """Messages waiting in each of the engine's queues (settings.RUNS_QUEUE and its
    control twin) as the broker counts them (engine.queue_depths), with the broker's
    error instead if it cannot be read."""
    names = [
        (settings.CELERY_TASK_DEFAULT_QUEUE, "steps"),
        # What goes there: config/settings.py CONTROL_TASKS.
        (settings.CELERY_RECOVERY_QUEUE, "control: batches, sweeps, probes, schedules, webhook"),
    ]
    depths, error = engine.queue_depths([name for name, _ in names])
    if depths is None:
        return [], error
    return [QueueDepth(name=name, role=role, messages=depths[name]) for name, role in names], ""


def workers_page() -> WorkersPage:
    now, waiting, oldest, paused, limited = _waiting()
    lease = float(settings.RUNS_LEASE_SECONDS)
    stale_before = now - timedelta(seconds=lease)
    workers = [
        WorkerRow(
            name=w.name,
            host=w.host,
            pid=w.pid,
            pool_pids=list(w.pool_pids),
            concurrency=w.concurrency,
            started_at=w.started_at,
            heartbeat_at=w.heartbeat_at,
            heartbeat_stale=w.heartbeat_at < stale_before,
        )
        for w in WorkerProcess.objects.order_by("name")
    ]
    # An attempt's `worker` is "host:pid" of the process that runs it (runs/tasks.py).
    by_process = {f"{w.host}:{pid}": w for w in workers for pid in (w.pool_pids or [w.pid])}
    rows = list(
        Attempt.objects.filter(status=AttemptStatus.RUNNING)
        .order_by("started_at", "id")
        .values_list(
            "id", "run_id", "step__key", "number", "worker", "started_at", "lease_expires_at"
        )[: ATTEMPTS_SHOWN + 1]
    )
    capped = len(rows) > ATTEMPTS_SHOWN
    unreported: list[RunningAttempt] = []
    for id_, run_id, key, number, worker, started, lease_expires in rows[:ATTEMPTS_SHOWN]:
        attempt = RunningAttempt(
            id=id_,
            run_id=run_id,
            step_key=key,
            number=number,
            worker=worker,
            started_at=started,
            lease_expires_at=lease_expires,
            lease_expired=lease_expires <= now,
        )
        owner = by_process.get(worker)
        (owner.attempts if owner else unreported).append(attempt)
    queues, broker_error = queue_depths()
    return WorkersPage(
        now=now,
        lease_seconds=lease,
        workers=workers,
        unreported=unreported,
        running=len(rows[:ATTEMPTS_SHOWN]),
        attempts_capped=capped,
        waiting=waiting,
        oldest_queued_at=oldest,
        paused=paused,
        limited=limited,
        limits=_limits(),
        queues=queues,
        broker_error=broker_error,
    )


@dataclass
class BatchWait:
    """Why a pending batch has not started (the batch page, docs/operating.md#bulk-
    operations): no worker reports itself within a lease, or the control queue's depth
    as the broker counts it (None with the broker's error if it cannot be read)."""

    worker_running: bool
    control_messages: int | None
    broker_error: str = ""


def batch_wait() -> BatchWait:
    """One query (a worker row whose heartbeat is within a lease, on the database's
    clock, as the workers page judges stale) and, if there is one, the broker."""
    lease = float(settings.RUNS_LEASE_SECONDS)
    running = WorkerProcess.objects.filter(heartbeat_at__gte=engine.db_now_plus(-lease)).exists()
    if not running:
        return BatchWait(worker_running=False, control_messages=None)
    queue = settings.CELERY_RECOVERY_QUEUE
    depths, error = engine.queue_depths([queue])
    return BatchWait(
        worker_running=True,
        control_messages=None if depths is None else depths[queue],
        broker_error=error,
    )
