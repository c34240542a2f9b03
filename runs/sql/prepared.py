"""A cursor for the engine's hot statements that PostgreSQL prepares once per connection.

Django's psycopg cursors bind parameters on the client: every statement is sent as text
and parsed and planned again each time. The engine runs the same few statements for
every step (start, finish, events, a map item's claim and fence), and with its CTEs
planning them cost about as much as executing them (bench/, pg_stat_statements with
track_planning: 1.2 s of planning beside 1.45 s of execution for 2,000 steps). A
server-binding cursor on the same connection has psycopg prepare each statement on its
first execution and then send only its parameters (plan_cache_mode decides whether
PostgreSQL then plans it again per execution: config/settings.py).

It is the same connection, in the same transaction: atomic blocks, on_commit hooks,
Django's error wrapping and execute wrappers (query counting) behave as with
`connection.cursor()`.

Prepared statements live on the PostgreSQL session; a pooler in transaction mode (PgBouncer
before 1.22, or without max_prepared_statements) hands each transaction to whichever
server connection is free, where psycopg's per-connection names (_pg3_0, ...) collide with
another client's or are missing. So nothing is prepared, and Django's own client-binding
cursor is used, when RUNS_PREPARED_STATEMENTS=0, when the connection's settings name a
pooler (DATABASE_POOLER) and RUNS_PREPARED_STATEMENTS is unset, or when, both unset, the
connection is seen to go through one: a pooler answers cancel requests itself, so the
backend pid it gave the client at startup is not the pid of the session that runs its
statements (one query per connection; docs/operating.md, "PgBouncer")."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import DEFAULT_DB_ALIAS, connections

log = logging.getLogger(__name__)


def cursor() -> Any:
    """A Django cursor wrapper around a server-binding psycopg cursor; use it as
    `with prepared.cursor() as c: c.execute(sql, params)`. One per connection, kept
    open and reused (a `with` block does not close it)."""
    # The thread's connection wrapper, looked up once (each attribute read through
    # django.db.connection is a thread-local lookup of its own).
    db = connections[DEFAULT_DB_ALIAS]
    wanted = settings.RUNS_PREPARED_STATEMENTS  # None: unless behind a pooler
    if wanted is False or (wanted is None and db.settings_dict.get("POOLER")):
        return db.cursor()
    # What connection.cursor() does, with the cursor class swapped.
    db.close_if_health_check_failed()
    if db.connection is None:
        db.ensure_connection()
    conn = db.connection
    if wanted is None and _through_pooler(db, conn):
        return db.cursor()
    if db.queries_logged:  # a debug wrapper records queries: a fresh one each time
        return _new(db, conn)
    kept = db.__dict__.get("_runs_prepared_cursor")
    if kept is None or kept.conn is not conn or kept.wrapper.cursor.closed:
        kept = db.__dict__["_runs_prepared_cursor"] = _Kept(conn, _new(db, conn))
    return kept


def _through_pooler(db: Any, conn: Any) -> bool:
    """Whether this connection goes through a pooler; asked once per connection."""
    seen = db.__dict__.get("_runs_through_pooler")
    if seen is not None and seen[0] is conn:
        return bool(seen[1])
    with db.wrap_database_errors:
        # On the psycopg connection itself, so that no query is counted or logged that
        # the caller did not run; part of the caller's transaction, if one is open.
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    pooled = bool(row[0] != conn.info.backend_pid)
    db.__dict__["_runs_through_pooler"] = (conn, pooled)
    if pooled:
        log.warning(
            "the database connection goes through a pooler (its backend pid is not the "
            "session's): the engine prepares no statements on it. Set DATABASE_POOLER="
            "pgbouncer for a PgBouncer in transaction mode (docs/operating.md, "
            '"PgBouncer"), or RUNS_PREPARED_STATEMENTS=1 for one that keeps them.'
        )
    return pooled


def _new(db: Any, conn: Any) -> Any:
    with db.wrap_database_errors:
        if conn.prepare_threshold is None:
            # Django turns psycopg's preparation off for the connection (for poolers);
            # only server-binding cursors, these, ever prepare, so turning it back on
            # changes nothing for Django's own (client-binding) cursors.
            conn.prepare_threshold = 5
        raw = _server_binding_class()(conn)
        return db._prepare_cursor(raw)


class _Kept:
    """A kept cursor: `with` hands out its wrapper and leaves it open."""

    def __init__(self, conn: Any, wrapper: Any) -> None:
        self.conn, self.wrapper = conn, wrapper

    def __enter__(self) -> Any:
        return self.wrapper

    def __exit__(self, *exc: object) -> None:
        return None


_CLASS: type | None = None


def _server_binding_class() -> type:
    global _CLASS
    if _CLASS is None:
        from django.db.backends.postgresql import base

        server_binding: Any = base.ServerBindingCursor

        class PreparingCursor(server_binding):  # type: ignore[misc]
            # Prepared on their first execution: a worker runs them thousands of times.
            def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
                kwargs["prepare"] = True
                return super().execute(query, params, **kwargs)

        _CLASS = PreparingCursor
    return _CLASS
