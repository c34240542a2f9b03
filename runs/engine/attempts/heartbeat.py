"""ctx.heartbeat() from inside an effect's transaction, on a connection of its own.

A transactional step's function runs inside its finish transaction, a transactional map
item's inside the item's transaction. A lease renewal there, on the worker's connection,
would keep the attempt row locked until that transaction ends: a worker paused after a
heartbeat (GC, a frozen VM) would then keep the sweeper, which skips locked attempts
(`FOR UPDATE SKIP LOCKED`), from recovering it, until the server ended the idle
transaction. So such a renewal goes through a second connection of the thread, in
autocommit: the row is locked only while the UPDATE runs, and the renewal stands
whether or not the effect's transaction commits.

The renewal is the same conditional UPDATE as renew_lease: the attempt still running
and its lease not yet expired, on the database's clock, else AttemptFenced. The
connection is opened at the first such heartbeat of a thread, from Django's settings
for the database, and closed by close() when the task that used it ends.
"""

from __future__ import annotations

import threading
from typing import Any

from django.db import connection

from runs import sql
from runs.errors import AttemptFenced
from runs.states import AttemptStatus

SQL = sql.load(__file__)


class _Local(threading.local):
    conn: Any = None


_local = _Local()


def renew_lease_aside(attempt_id: int, seconds: float, *, until: float | None = None) -> None:
    """Extend a live lease from the thread's second connection (never past `until`
    seconds after the attempt's start, as renew_lease), or raise AttemptFenced if it was
    lost."""
    conn = _connection()
    try:
        renewed = conn.execute(
            SQL["renew"],
            {
                "lease": float(seconds),
                "until": None if until is None else float(until),
                "attempt": attempt_id,
                "running": AttemptStatus.RUNNING.value,
            },
        ).rowcount
    except Exception:
        close()  # never reuse a connection in an unknown state; the next one is new
        raise
    if renewed != 1:
        raise AttemptFenced(f"attempt {attempt_id} lost its lease")


def _connection() -> Any:
    conn = _local.conn
    if conn is None or conn.closed:
        conn = connection.get_new_connection(connection.get_connection_params())
        conn.autocommit = True
        _local.conn = conn
    return conn


def close() -> None:
    """Close the thread's heartbeat connection, if it has one."""
    conn, _local.conn = _local.conn, None
    if conn is not None and not conn.closed:
        try:
            conn.close()
        except Exception:  # closing a broken connection: nothing left to release
            pass


__all__ = ["close", "renew_lease_aside"]
