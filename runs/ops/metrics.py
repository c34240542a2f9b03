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

import functools
import os
from collections.abc import Iterator
from typing import Any

from django.db import connection, transaction
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from runs import sql
from runs.principals import ENGINE_BREAKER
from runs.states import RUN_ACTIVE, ClaimStatus, RunStatus, StepStatus

SQL = sql.load(__file__)

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


@functools.lru_cache(maxsize=4096)
def child(metric: Any, *values: str) -> Any:
    """`metric.labels(*values)`, kept: a step's path asks for the same few children on
    every attempt, and labels() checks, joins and locks each time. Bounded: the
    labels are workflows, kinds and outcomes, not runs."""
    return metric.labels(*values)


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
PAUSED_STARTS = Counter(
    f"{PREFIX}_paused_starts_total",
    "Deliveries of a step that a pause refused to start (the step stays queued), by workflow.",
    ["workflow"],
)
PURGED = Counter(
    f"{PREFIX}_retention_rows_total",
    "Rows retention compacted or deleted, by stage.",
    ["stage", "action"],
)
WEBHOOKS = Counter(
    f"{PREFIX}_webhook_deliveries_total",
    "Webhook delivery tries by event and outcome (delivered; failed: another try is "
    "scheduled; gave_up: its tries used up, kept as failed).",
    ["event", "outcome"],
)


def on_commit(apply: Any) -> None:
    """Count only what committed: inside a transaction, after its commit."""
    transaction.on_commit(apply)


class DatabaseCollector(Collector):
    """Gauges read from PostgreSQL at scrape time (docs/operating.md#alerts says which
    alert reads which): the reconciliation queue (count and age of its oldest claim),
    runs by status, the steps queued for a worker (count and age of the oldest, of runs
    where they can start: workers that stopped taking work), each retention policy's
    time since its last purge, the webhook outbox's undelivered events, and pauses with
    the steps waiting behind them."""

    def collect(self) -> Iterator[Metric]:
        with connection.cursor() as cursor:
            cursor.execute(SQL["unresolved_claims"], {"unresolved": ClaimStatus.UNRESOLVED})
            count, oldest = cursor.fetchone()
            cursor.execute(SQL["runs_by_status"])
            by_status = dict(cursor.fetchall())
            cursor.execute(SQL["pauses"], {"breaker": ENGINE_BREAKER})
            pauses, breaker_pauses = cursor.fetchone()
            # Steps count only where they can start: of an active run (a compensation,
            # of a compensating one).
            waiting: dict[str, Any] = {
                "queued": StepStatus.QUEUED.value,
                "retrying": StepStatus.RETRYING.value,
                "active": [str(status) for status in RUN_ACTIVE],
                "compensating": [RunStatus.COMPENSATING.value],
            }
            paused_steps = 0
            if pauses:
                cursor.execute(SQL["paused_steps"], waiting)
                (paused_steps,) = cursor.fetchone()
            cursor.execute(SQL["queued_steps"], waiting)
            queued, oldest_queued = cursor.fetchone()
            cursor.execute(SQL["retention_last_purge"])
            purges = cursor.fetchall()
            cursor.execute(SQL["webhook_pending"], {"pending": "pending"})
            pending, oldest_pending = cursor.fetchone()
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
        yield GaugeMetricFamily(
            f"{PREFIX}_pauses", "Pauses in effect (workflows or steps paused).", value=pauses
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_breaker_pauses",
            "Pauses in effect that a step's breaker made (actor engine:breaker).",
            value=breaker_pauses,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_paused_steps",
            "Steps queued (or retrying) behind a pause, of runs still going on.",
            value=paused_steps,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_queued_steps",
            "Steps queued for a worker (ready, no attempt started yet) of runs where they "
            "can start (active; a compensation: compensating).",
            value=queued,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_oldest_queued_step_age_seconds",
            "Time the longest-queued of those steps has waited since it became ready "
            "(0 when none).",
            value=float(oldest_queued),
        )
        retention = GaugeMetricFamily(
            f"{PREFIX}_retention_last_purge_age_seconds",
            "Seconds since each enabled retention policy's last completed purge (since "
            "its creation if it never had one).",
            labels=["policy"],
        )
        for policy, age in purges:
            retention.add_metric([policy], float(age))
        yield retention
        yield GaugeMetricFamily(
            f"{PREFIX}_webhook_pending",
            "Webhook events not delivered yet (their tries not used up).",
            value=pending,
        )
        yield GaugeMetricFamily(
            f"{PREFIX}_oldest_webhook_pending_age_seconds",
            "Age of the oldest webhook event not delivered yet (0 when none).",
            value=float(oldest_pending),
        )


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
