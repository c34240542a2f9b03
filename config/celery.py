"""The Celery app. The broker only delivers hints ("step N may be ready"); every
fact lives in PostgreSQL, so settings here favour redelivery over loss."""

import os
import sys
import tempfile
from typing import Any

from celery import Celery, bootsteps
from celery.signals import worker_ready

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# A prefork worker's metrics are counted in its child processes: prometheus-client adds
# them up from files in PROMETHEUS_MULTIPROC_DIR, which must be set before it is first
# imported (here, before Django loads anything). A worker given none gets a fresh one.
if "worker" in sys.argv[1:] and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="durable-runs-metrics-")

app = Celery("durable_runs")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

# How often, at most, a worker's event loop looks at its shutdown flag while idle.
SHUTDOWN_CHECK_SECONDS = 1.0


class ShutdownPromptly(bootsteps.StartStopStep):  # type: ignore[misc]
    """A worker's event loop sleeps until its next timer, for up to 10 s. On SIGTERM
    Celery only sets a flag that the loop reads when it wakes, so an idle worker on
    RabbitMQ, whose only timer is the AMQP heartbeat check (every minute), took about
    10 s to stop (on Redis about 1 s): as long as `docker stop` waits before its
    SIGKILL. A timer that does nothing wakes the loop every second."""

    requires = {"celery.worker.components:Hub"}

    def start(self, worker: Any) -> None:
        if worker.hub is not None:
            worker.hub.call_repeatedly(SHUTDOWN_CHECK_SECONDS, _nothing)


def _nothing() -> None:
    pass


app.steps["worker"].add(ShutdownPromptly)


@worker_ready.connect  # type: ignore[untyped-decorator]
def serve_worker_metrics(**_: object) -> None:
    """With RUNS_WORKER_METRICS_PORT set, the worker's main process serves the metrics
    of all its processes (Prometheus text format) on RUNS_WORKER_METRICS_ADDR."""
    from django.conf import settings

    if not settings.RUNS_WORKER_METRICS_PORT:
        return
    from prometheus_client import start_http_server

    from runs.metrics import process_registry

    start_http_server(
        settings.RUNS_WORKER_METRICS_PORT,
        addr=settings.RUNS_WORKER_METRICS_ADDR,
        registry=process_registry(),
    )
