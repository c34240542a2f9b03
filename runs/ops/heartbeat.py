"""A worker's report of itself for the workers page (docs/operating.md#workers-and-queues):
its main process writes a row (runs_workerprocess) when it starts, refreshes it from a
thread of its own every RUNS_WORKER_HEARTBEAT_SECONDS, and deletes it when it stops
cleanly. A worker killed or frozen stops refreshing it: the page calls it silent.

The heartbeat is a timer beside the worker, not a statement per step (the step path is
benchmarked, docs/performance.md), and a thread rather than a timer of Celery's event
loop: a solo worker's loop does not turn while a step runs, a thread's timer does. Each
write is an upsert keyed on the node name, so nothing is checked in Python first; a row
that went missing is written again by the next heartbeat.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection

from runs import sql

log = logging.getLogger(__name__)

SQL = sql.load(__file__)


@dataclass
class Identity:
    name: str
    host: str
    pid: int
    concurrency: int


class Heartbeat:
    """The row of one worker process, kept fresh by a daemon thread until stop()."""

    def __init__(
        self,
        identity: Identity,
        pool_pids: Callable[[], list[int]],
        *,
        interval: float | None = None,
        also: Callable[[], None] | None = None,
    ) -> None:
        self.identity = identity
        self.pool_pids = pool_pids
        self.interval = interval or float(settings.RUNS_WORKER_HEARTBEAT_SECONDS)
        self.also = also  # housekeeping of the worker's own on the same timer
        self.started: datetime | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="runs-heartbeat", daemon=True)

    def _params(self) -> dict[str, Any]:
        i = self.identity
        return {
            "name": i.name,
            "host": i.host,
            "pid": i.pid,
            "pids": self.pool_pids(),
            "concurrency": i.concurrency,
            "started": self.started,
        }

    def start(self) -> None:
        """Write the row (and drop rows of workers silent for RUNS_WORKER_FORGET_SECONDS),
        then start the thread. A worker starts whether or not PostgreSQL answers now (its
        tasks retry until it does): the first heartbeat that gets through writes the row."""
        try:
            with connection.cursor() as cursor:
                cursor.execute(
                    SQL["forget"], {"forget": float(settings.RUNS_WORKER_FORGET_SECONDS)}
                )
                cursor.execute(SQL["register"], self._params())
                self.started = cursor.fetchone()[0]
        except Exception:
            log.warning("could not write the worker's row; its heartbeat will", exc_info=True)
            connection.close()
        self._thread.start()

    def beat(self) -> None:
        with connection.cursor() as cursor:
            cursor.execute(SQL["beat"], self._params())

    def _run(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    self.beat()
                except Exception:
                    # PostgreSQL away: say so, reconnect at the next beat; the page shows
                    # the worker silent meanwhile, which is what it is to the engine.
                    log.warning("worker heartbeat failed", exc_info=True)
                    connection.close()
                if self.also is not None:
                    try:
                        self.also()
                    except Exception:
                        log.warning("worker housekeeping failed", exc_info=True)
        finally:
            connection.close()  # this thread's own connection

    def stop(self) -> None:
        """Stop the thread and delete the row: a worker that stopped cleanly is gone, not
        silent."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=self.interval + 5)
        i = self.identity
        try:
            with connection.cursor() as cursor:
                cursor.execute(SQL["unregister"], {"name": i.name, "host": i.host, "pid": i.pid})
        except Exception:
            log.warning("could not remove the worker's row; it will show as silent", exc_info=True)


__all__ = ["Heartbeat", "Identity"]
