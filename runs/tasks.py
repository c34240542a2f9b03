"""Celery entry points: ids in, one engine call, nothing else."""

from __future__ import annotations

import os
import socket
from typing import Any

from celery import shared_task
from celery.signals import task_postrun, worker_process_init, worker_ready
from django.conf import settings
from django.db import InterfaceError, OperationalError, close_old_connections, connection

from runs import engine
from runs.batches import service as batches

# While PostgreSQL is unreachable a task cannot even record its failure; re-sending the
# message with backoff keeps it (duplicates are harmless), instead of acking it away
# and waiting for the sweeper's republish bound.
DB_UNREACHABLE = (OperationalError, InterfaceError)
# A task that must not be lost with its worker either: acked after it ran, given back
# to the broker if its worker dies, sent again while PostgreSQL does not answer.
REDELIVERED_UNTIL_THE_DATABASE_ANSWERS: dict[str, Any] = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "autoretry_for": DB_UNREACHABLE,
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "retry_jitter": True,
    "max_retries": 20,
}


@shared_task(
    name="runs.execute_step",
    **REDELIVERED_UNTIL_THE_DATABASE_ANSWERS,
)
def execute_step(step_id: int) -> str:
    return engine.execute_step(
        step_id=step_id,
        worker=f"{socket.gethostname()}:{os.getpid()}",
        successors=int(settings.RUNS_DIRECT_SUCCESSORS),
    )


@shared_task(name="runs.probe_claim", acks_late=True, reject_on_worker_lost=True)
def probe_claim(claim_id: int) -> str:
    return engine.probe_claim(claim_id=claim_id)


@shared_task(name="runs.sweep", acks_late=True)
def sweep() -> str:
    return str(engine.sweep())


@shared_task(name="runs.apply_retention", acks_late=True)
def apply_retention() -> str:
    """Beat's periodic purge (settings.RUNS_RETENTION_INTERVAL). A duplicate delivery or
    two overlapping purges are harmless: each batch locks its rows with SKIP LOCKED."""
    return "; ".join(r.line() for r in engine.retention.apply())


@shared_task(name="runs.fire_schedules", acks_late=True)
def fire_schedules() -> str:
    return str(engine.fire_due_schedules())


@shared_task(
    name=batches.PROCESS_BATCH,
    **REDELIVERED_UNTIL_THE_DATABASE_ANSWERS,
)
def process_batch(batch_id: int) -> str:
    """A chunk of a batch's items; the next chunk is another message (a killed worker
    loses none: its items stay pending, resume_batches sends the batch again)."""
    progress = batches.process(batch_id)
    if progress.more:
        batches.send(batch_id)
    return progress.line()


@shared_task(name="runs.resume_batches", acks_late=True)
def resume_batches() -> str:
    """Beat's periodic recovery of batches whose items stopped moving."""
    return f"resumed batches {batches.resume()}"


@worker_ready.connect
def sweep_at_start(**_: object) -> None:
    """A worker that starts after a crash recovers what the dead one left behind: its
    attempts (the sweep) and the batches it was processing."""
    engine.sweep()
    if not settings.RUNS_SWEEP_ONLY_RUNS:  # a demo's worker resumes nobody's batches
        batches.resume(stalled_only=False)


@worker_process_init.connect
def replace_hung_processes(**_: object) -> None:
    """A prefork pool's child may end itself when a step outlives its timeout and grace
    (runs/engine/core/timeouts.py): the pool starts a new child in its place."""
    engine.replace_hung_processes()


@task_postrun.connect
def keep_connections(**_: object) -> None:
    """Django's per-request connection rule, after each task: keep the connection (no
    new connection and session set-up per step) unless it is older than CONN_MAX_AGE or
    an error left it unusable (config/settings.py, CELERY_DB_REUSE_MAX).

    The next task skips the health check (a `SELECT 1`, a transaction of its own before
    every step): a connection that broke while idle (PostgreSQL restarted) fails that
    task's first statement with OperationalError, which retries the task (DB_UNREACHABLE
    above) and marks the connection, closed here, so the retry reconnects."""
    close_old_connections()
    if connection.connection is not None:
        connection.health_check_done = True  # type: ignore[attr-defined]
