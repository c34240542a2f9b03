"""The Celery app. The broker only delivers hints ("step N may be ready"); every
fact lives in PostgreSQL, so settings here favour redelivery over loss."""

import atexit
import contextlib
import os
import shutil
import socket
import sys
import tempfile
from typing import Any

from celery import Celery, bootsteps
from celery.signals import (
    beat_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from config import tracing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

# A prefork worker's metrics are counted in its child processes: prometheus-client adds
# them up from files in PROMETHEUS_MULTIPROC_DIR, which must be set before it is first
# imported (here, before Django loads anything). A worker given none gets a fresh one,
# which it removes when it exits (docs/operating.md#metrics-of-worker-processes); a
# directory the environment gives belongs to whoever gave it and is never removed.
_OWN_METRICS_DIR: tuple[str, int] | None = None  # (the directory, the pid that made it)


def _remove_own_metrics_dir() -> None:
    # Pool children inherit this module's state but leave through os._exit (no atexit);
    # the pid check keeps any other process that inherits it from removing it.
    if _OWN_METRICS_DIR is not None and _OWN_METRICS_DIR[1] == os.getpid():
        shutil.rmtree(_OWN_METRICS_DIR[0], ignore_errors=True)


if "worker" in sys.argv[1:] and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    _OWN_METRICS_DIR = (tempfile.mkdtemp(prefix="durable-runs-metrics-"), os.getpid())
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = _OWN_METRICS_DIR[0]
    atexit.register(_remove_own_metrics_dir)

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


def _pool_children(pool: Any) -> list[int] | None:
    """The pids of a prefork pool's children; None for a pool that runs tasks in the
    worker's main process (solo, threads)."""
    processes = getattr(getattr(pool, "_pool", None), "_pool", None)
    if processes is None:
        return None
    return [p.pid for p in list(processes) if p.pid]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _mark_process_dead(pid: int) -> None:
    """prometheus-client's bookkeeping for a process that is gone: its live gauges'
    files are removed, so sums of live gauges count only processes that run."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)  # type: ignore[no-untyped-call]


def _children_registry(parent: int) -> str | None:
    """Where a prefork child of `parent` notes its pid when it starts (a subdirectory of
    the metrics directory, which prometheus-client's `*.db` glob never reads)."""
    base = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    return os.path.join(base, f"children-of-{parent}") if base else None


class ForgetDeadChildren:
    """The parent's half of mark_process_dead: a child killed outright (SIGKILL, the OOM
    killer) runs no shutdown signal, so each heartbeat marks dead the children it saw
    before that are neither in the pool nor alive any more. Only this worker's own
    children: the directory may be shared with processes whose pids this one cannot see
    (other containers), which must keep their files."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        self.seen: set[int] = set()

    def __call__(self) -> None:
        current = set(_pool_children(self.pool) or ())
        # The children that noted themselves at start too: one killed before any
        # heartbeat saw it in the pool would otherwise keep its live gauges forever.
        registry = _children_registry(os.getpid())
        noted = set()
        if registry and os.path.isdir(registry):
            noted = {int(name) for name in os.listdir(registry) if name.isdigit()}
        self.seen |= current | noted
        for pid in self.seen - current:
            if not _alive(pid):
                _mark_process_dead(pid)
                self.seen.discard(pid)
                if registry:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(os.path.join(registry, str(pid)))


class WorkerHeartbeat(bootsteps.StartStopStep):  # type: ignore[misc]
    """The worker's row for the workers page (runs/ops/heartbeat.py), written at start, kept
    fresh by a thread, deleted at a clean stop; after the pool, whose pids it reports."""

    requires = {"celery.worker.components:Pool"}
    heartbeat: Any = None

    def start(self, worker: Any) -> None:
        from runs.ops.heartbeat import Heartbeat, Identity
        from runs.ops.metrics import WORKER_PROCESSES

        pool = worker.pool
        if _pool_children(pool) is None:
            WORKER_PROCESSES.set(1)  # tasks run in this process
        self.heartbeat = Heartbeat(
            Identity(
                name=worker.hostname,
                host=socket.gethostname(),
                pid=os.getpid(),
                concurrency=int(worker.concurrency or 1),
            ),
            pool_pids=lambda: _pool_children(pool) or [os.getpid()],
            also=ForgetDeadChildren(pool),
        )
        self.heartbeat.start()

    def stop(self, worker: Any) -> None:
        heartbeat, self.heartbeat = self.heartbeat, None
        if heartbeat is not None:
            heartbeat.stop()
        if _OWN_METRICS_DIR is None:
            _mark_process_dead(os.getpid())  # a directory that outlives this worker

    terminate = stop  # a cold shutdown (a second SIGTERM, SIGQUIT) too


app.steps["worker"].add(WorkerHeartbeat)


@worker_process_init.connect  # type: ignore[untyped-decorator]
def count_pool_child(**_: object) -> None:
    """A prefork child runs tasks: it counts itself among the live worker processes."""
    from runs.ops.metrics import WORKER_PROCESSES

    # Noted before its first live gauge exists, so that no gauge of it can outlive it
    # unknown to its parent's ForgetDeadChildren.
    registry = _children_registry(os.getppid())
    if registry:
        os.makedirs(registry, exist_ok=True)
        with open(os.path.join(registry, str(os.getpid())), "w"):
            pass
    WORKER_PROCESSES.set(1)


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]
def forget_pool_child(pid: int | None = None, **_: object) -> None:
    """Runs in a prefork child as it exits (recycled by --max-tasks-per-child, or at
    shutdown): its live gauges go with it, and its batched spans are exported."""
    _mark_process_dead(pid or os.getpid())
    tracing.shutdown()


@worker_process_init.connect  # type: ignore[untyped-decorator]
def trace_worker_process(**_: object) -> None:
    """Each process that runs tasks traces (docs/operating.md#tracing) if the
    environment asks: a prefork pool's child after its fork, a solo worker itself."""
    tracing.setup("worker")


@beat_init.connect  # type: ignore[untyped-decorator]
def trace_beat(**_: object) -> None:
    tracing.setup("beat")


@worker_shutdown.connect  # type: ignore[untyped-decorator]
def forget_every_child(**_: object) -> None:
    """Runs in the worker's main process after its pool has stopped (this step stops
    before the pool does, so it cannot do this itself): a child the pool ended at
    shutdown before its own worker_process_shutdown ran (one forked a moment earlier,
    say) would otherwise leave its live gauges in a directory that outlives the worker.
    Every child noted in the registry is gone by now, or reaped by nobody (a zombie
    answers kill(pid, 0)), so none is asked whether it is alive."""
    tracing.shutdown()  # a solo worker's spans (its tasks ran in this process)
    registry = _children_registry(os.getpid())
    if not registry or not os.path.isdir(registry):
        return
    for name in os.listdir(registry):
        if name.isdigit():
            _mark_process_dead(int(name))
    shutil.rmtree(registry, ignore_errors=True)


@worker_ready.connect  # type: ignore[untyped-decorator]
def serve_worker_metrics(**_: object) -> None:
    """With RUNS_WORKER_METRICS_PORT set, the worker's main process serves the metrics
    of all its processes (Prometheus text format) on RUNS_WORKER_METRICS_ADDR."""
    from django.conf import settings

    if not settings.RUNS_WORKER_METRICS_PORT:
        return
    from prometheus_client import start_http_server

    from runs.ops.metrics import process_registry

    start_http_server(
        settings.RUNS_WORKER_METRICS_PORT,
        addr=settings.RUNS_WORKER_METRICS_ADDR,
        registry=process_registry(),
    )
