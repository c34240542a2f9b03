"""Celery entry points: ids in, one engine call, nothing else."""

from __future__ import annotations

import os
import socket

from celery import shared_task
from celery.signals import worker_ready

from runs import engine


@shared_task(name="runs.execute_step", acks_late=True, reject_on_worker_lost=True)
def execute_step(step_id: int) -> str:
    return engine.execute_step(step_id=step_id, worker=f"{socket.gethostname()}:{os.getpid()}")


@shared_task(name="runs.sweep", acks_late=True)
def sweep() -> str:
    return str(engine.sweep())


@worker_ready.connect
def sweep_at_start(**_: object) -> None:
    """A worker that starts after a crash recovers what the dead one left behind."""
    engine.sweep()
