"""Worker processes as they report themselves (runs/ops/heartbeat.py): who runs steps now,
for the workers page (docs/operating.md#workers-and-queues). Not part of any run's
state: nothing in the engine reads it, and a lost row only hides a worker from that page
until its next heartbeat writes it again."""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models.functions import Now


class WorkerProcess(models.Model):
    # Celery's node name (`-n`, e.g. "w1@host"): one row per running worker.
    name = models.CharField(max_length=200, unique=True)
    host = models.CharField(max_length=200)
    # The worker's main process.
    pid = models.PositiveIntegerField()
    # The processes that run its tasks (a solo worker: its main process; prefork: the pool's
    # children), as last reported: an attempt's `worker` is "host:pid" of one of them.
    pool_pids = ArrayField(models.PositiveIntegerField(), default=list, blank=True)
    concurrency = models.PositiveIntegerField(default=1)
    # Both on the database's clock.
    started_at = models.DateTimeField(db_default=Now())
    heartbeat_at = models.DateTimeField(db_default=Now())

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return f"worker {self.name} ({self.host}:{self.pid})"
