"""Prometheus metrics.

Counters and histograms are written where things happen (the engine's edges, after
the transaction that made them true has committed) in every process: web, and Celery
worker processes. With PROMETHEUS_MULTIPROC_DIR set (gunicorn's workers, Celery's
prefork children; config/celery.py sets one for workers) each process writes its
values to files there and a scrape adds them up, so a worker child that was killed
still counts. Counts that live in the database (unresolved claims, runs by status)
are read from it at scrape time by DatabaseCollector, with indexed queries.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from django.db import transaction
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

PREFIX = "durable_runs"
# Step durations run from milliseconds (pure) to hours (a long guarded call).
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)

STEPS = Counter(
    f"{PREFIX}_steps_total",
    "Step attempts by workflow, effect kind and outcome (started, succeeded, failed, "
    "retrying, unresolved, crashed, deferred, fenced).",
    ["workflow", "kind", "outcome"],
)
RECOVERED = Counter(
    f"{PREFIX}_attempts_recovered_total",
    "Attempts the recovery sweeper declared crashed (their lease expired).",
    ["workflow", "kind"],
)
STEP_SECONDS = Histogram(
    f"{PREFIX}_step_duration_seconds",
    "Time from an attempt's start to its finish, by workflow and effect kind.",
    ["workflow", "kind"],
    buckets=DURATION_BUCKETS,
)
QUEUE_WAIT = Histogram(
    f"{PREFIX}_step_queue_wait_seconds",
    "Time a step waited between being queued and its attempt starting.",
    ["workflow", "kind"],
    buckets=DURATION_BUCKETS,
)
PROBES = Counter(
    f"{PREFIX}_probe_outcomes_total",
    "Probe answers about unresolved claims (applied, not_applied, unknown, superseded), "
    "and probes that gave up (gave_up: their tries used up without an answer).",
    ["outcome"],
)
# A live gauge: each worker process that runs tasks sets it to 1 (config/celery.py), and
# in multiprocess mode the sum counts only processes alive, which holds as long as a dead
# one's file is removed (mark_process_dead, docs/operating.md#metrics-of-worker-processes).
WORKER_PROCESSES = Gauge(
    f"{PREFIX}_worker_processes",
    "Celery worker processes that run tasks, alive now (prefork children, or a solo "
    "worker's process).",
    multiprocess_mode="livesum",
)
PURGED = Counter(
    f"{PREFIX}_retention_rows_total",
    "Rows retention compacted or deleted, by stage.",
    ["stage", "action"],
)


def on_commit(apply: Any) -> None:
    """Count only what committed: inside a transaction, after its commit."""
    transaction.on_commit(apply)


class DatabaseCollector(Collector):
    """Gauges read from PostgreSQL at scrape time: the reconciliation queue (count and
    age of its oldest claim, by the partial index on unresolved claims) and runs by
    status (by the status index)."""

    def collect(self) -> Iterator[Metric]:
        from django.db import connection

        from runs.states import RunStatus

        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT count(*), coalesce(extract(epoch FROM now() - min(unresolved_at)), 0) "
                "FROM runs_claim WHERE status = 'unresolved'"
            )
            count, oldest = cursor.fetchone()
            cursor.execute("SELECT status, count(*) FROM runs_run GROUP BY status")
            by_status = dict(cursor.fetchall())
        yield GaugeMetricFamily(
            f"{PREFIX}_unresolved_claims", "Claims waiting for a decision.", value=count
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_oldest_unresolved_claim_age_seconds",
            "Age of the oldest claim waiting for a decision (0 when none).",
            value=float(oldest),
        )
        runs = GaugeMetricFamily(f"{PREFIX}_runs", "Runs by status.", labels=["status"])
        for status in RunStatus.values:
            runs.add_metric([status], by_status.get(status, 0))
        yield runs


def process_registry() -> CollectorRegistry:
    """What this process (and, in multiprocess mode, its siblings) counted."""
    from prometheus_client import REGISTRY, multiprocess

    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return registry
    return REGISTRY


def exposition(*, with_database: bool) -> bytes:
    registry = process_registry()
    text = generate_latest(registry)
    if with_database:
        db = CollectorRegistry()
        db.register(DatabaseCollector())
        text += generate_latest(db)
    return text
