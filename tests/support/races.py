"""Deterministic interleavings of two database sessions, for race tests.

`blocked(pid)` tells when a backend waits on a lock, so a test can hold a row in one
thread, let another thread's statement block on it, then release: a real PostgreSQL
interleaving, no sleeps."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connection, connections
from django.db.utils import load_backend

from tests.support.waiting import wait_for


def backend_pid() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return int(cursor.fetchone()[0])


def is_waiting_on_lock(pid: int) -> bool:
    """True while backend `pid` waits for a lock. Asked on a connection of its own, in
    autocommit: inside a transaction pg_stat_activity would be a frozen snapshot."""
    params = connection.get_connection_params()
    raw = connection.get_new_connection(params)
    try:
        raw.autocommit = True
        row = raw.execute(
            "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = %s", [pid]
        ).fetchone()
    finally:
        raw.close()
    return bool(row and row[0])


class Background:
    """Run `fn` in a thread with its own database connection; keep its result or error.
    `database` (a complete settings dict, e.g. the test database's with another HOST and
    PORT) makes that thread's default connection one to it: everything `fn` runs, the
    ORM and the engine alike, goes there."""

    def __init__(self, fn: Callable[[], Any], *, database: Mapping[str, Any] | None = None) -> None:
        self.fn = fn
        self.database = database
        self.pid: int | None = None
        self.result: Any = None
        self.error: BaseException | None = None
        self._pid_ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self._pid_ready.wait(10)

    def _run(self) -> None:
        try:
            if self.database is not None:
                backend = load_backend(self.database["ENGINE"])
                # Connections are per thread: this replaces the default one of this thread only.
                connections[DEFAULT_DB_ALIAS] = backend.DatabaseWrapper(
                    dict(self.database), DEFAULT_DB_ALIAS
                )
            self.pid = backend_pid()
            self._pid_ready.set()
            self.result = self.fn()
        except BaseException as exc:  # reported by join()
            self.error = exc
        finally:
            self._pid_ready.set()
            connection.close()

    def wait_blocked(self, timeout: float = 10) -> None:
        assert self.pid is not None
        wait_for(lambda: is_waiting_on_lock(self.pid), timeout=timeout, what="a lock wait")

    def join(self, timeout: float = 30) -> Any:
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "background session did not finish"
        if self.error is not None:
            raise self.error
        return self.result
