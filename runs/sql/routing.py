"""Reading pages from a streaming replica (docs/operating.md, "A read replica").

With DATABASE_REPLICA_URL set, settings add a database alias `replica`. Nothing reads
from it unless a reading page asks: inside `reading_from(REPLICA)` the router sends the
reads of the project's own models there, and `cursor()` gives the raw-SQL page queries
the same connection. Every write, every read outside such a block (the engine, workers,
the queue's decide form, sessions and logins) stays on `default`, the primary.

A replica runs behind its primary. How far is read from the replica itself, and a
client that has just written carries the primary's WAL position of that write
(runs/pages/replica.py) so that it reads the primary until the replica has replayed it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections
from django.db.backends.utils import CursorWrapper

from runs.sql import load

logger = logging.getLogger(__name__)
SQL = load(__file__)

REPLICA = "replica"
# The apps whose rows pages show: auth, sessions, the cache and the admin's log are read
# where they are written.
REPLICATED_APPS = frozenset({"runs", "reconciliation", "examples"})

_reads: ContextVar[str] = ContextVar("runs_reads_from", default=DEFAULT_DB_ALIAS)
# Monotonic time before which this process does not try the replica again, after it
# failed to answer: a replica that is away costs one failed connection per interval,
# not one per page.
_retry_after = 0.0


def configured() -> bool:
    return REPLICA in settings.DATABASES


def reads_alias() -> str:
    """The database this block's reads go to: `replica` inside `reading_from(REPLICA)`."""
    return _reads.get()


@contextmanager
def reading_from(alias: str) -> Iterator[None]:
    token = _reads.set(alias)
    try:
        yield
    finally:
        _reads.reset(token)


def cursor() -> CursorWrapper:
    """A cursor on the database this block reads from (for raw-SQL page queries)."""
    return connections[reads_alias()].cursor()


class Router:
    """DATABASE_ROUTERS: reads of REPLICATED_APPS inside `reading_from(REPLICA)` go to
    the replica; writes, and everything else, to the default database. The replica is
    never migrated: it replays its primary's schema."""

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        alias = _reads.get()
        if alias == DEFAULT_DB_ALIAS or model._meta.app_label not in REPLICATED_APPS:
            return None
        # A transaction opened on the primary inside a reading page (a lock, a write)
        # reads what it writes.
        if connections[DEFAULT_DB_ALIAS].in_atomic_block:
            return None
        return alias

    def db_for_write(self, model: type[Any], **hints: Any) -> str | None:
        return None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        # A row read from the replica is the primary's row: relating them is fine.
        return True

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        return False if db == REPLICA else None


@dataclass(frozen=True)
class ReplicaState:
    # Seconds of the primary's history not yet visible here: 0 when every WAL record
    # received is replayed; otherwise how long ago the last replayed commit was made.
    lag_seconds: float
    # The WAL position replayed, as an integer (pg_lsn minus '0/0').
    replayed: int


def state() -> ReplicaState | None:
    """The replica's lag and replay position, or None when it does not answer (then
    pages read the primary, and the replica is not asked again for
    RUNS_REPLICA_RETRY_SECONDS)."""
    global _retry_after
    if time.monotonic() < _retry_after:
        return None
    try:
        with connections[REPLICA].cursor() as c:
            c.execute(SQL["replica_state"])
            in_recovery, lag, replayed = c.fetchone()
    except DatabaseError as exc:
        _retry_after = time.monotonic() + settings.RUNS_REPLICA_RETRY_SECONDS
        logger.warning("replica unavailable, pages read the primary: %s", exc)
        connections[REPLICA].close()
        return None
    if not in_recovery:
        # Promoted, or DATABASE_REPLICA_URL names a primary: what it shows is current.
        return ReplicaState(lag_seconds=0.0, replayed=-1)
    return ReplicaState(lag_seconds=max(0.0, float(lag or 0.0)), replayed=int(replayed or 0))


def primary_position() -> int:
    """The primary's current WAL position: a read of the replica that has replayed it
    sees every commit made before this call."""
    with connections[DEFAULT_DB_ALIAS].cursor() as c:
        c.execute(SQL["primary_position"])
        return int(c.fetchone()[0])


def has_replayed(replica: ReplicaState, position: int) -> bool:
    return replica.replayed < 0 or replica.replayed >= position
