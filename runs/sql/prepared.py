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

Each statement text has a psycopg cursor of its own, kept with the connection. psycopg
builds a new Transformer (its cache of how to send each Python type and read each column
type) whenever a cursor runs a statement other than its last, and the engine alternates
between a few statements: with one cursor for all, every parameter's dumper was looked up
anew on every execution (py-spy: about 8% of a chained step's worker time). Without
execute wrappers installed, the statement goes to psycopg directly, inside Django's
error wrapping and its broken-transaction check, not through CursorWrapper's layers.

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
from psycopg.types.datetime import TimestamptzLoader

log = logging.getLogger(__name__)


def cursor() -> Any:
    """A cursor for `with prepared.cursor() as c: c.execute(sql, params)`: a
    server-binding psycopg cursor per statement text, kept with the connection and
    reused (a `with` block closes nothing); Django's own cursor where nothing may be
    prepared."""
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
    if kept is None or kept.conn is not conn:
        kept = db.__dict__["_runs_prepared_cursor"] = _PerStatement(db, conn)
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
    """A Django cursor wrapper around a new server-binding cursor."""
    return db._prepare_cursor(_raw(db, conn))


def _raw(db: Any, conn: Any) -> Any:
    with db.wrap_database_errors:
        if conn.prepare_threshold is None:
            # Django turns psycopg's preparation off for the connection (for poolers);
            # only server-binding cursors, these, ever prepare, so turning it back on
            # changes nothing for Django's own (client-binding) cursors.
            conn.prepare_threshold = 5
        raw = _server_binding_class()(conn)
        # psycopg's own loader (its C one) for timestamps, not Django's Python subclass,
        # which only swaps the tzinfo for Django's (the session's zone is UTC either
        # way: the same instants). A start's row carries several (py-spy: 7% of a
        # chained step's worker time).
        raw.adapters.register_loader("timestamptz", TimestamptzLoader)
        return raw


class _PerStatement:
    """The connection's kept cursors, one per statement text, behind one cursor's face:
    `with` hands out this object and leaves everything open; execute() picks the
    statement's own cursor, and fetchone(), fetchall(), rowcount and description read
    the one that ran last."""

    def __init__(self, db: Any, conn: Any) -> None:
        self.db, self.conn = db, conn
        self._cursors: dict[str, Any] = {}
        self._last: Any = None

    def __enter__(self) -> _PerStatement:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def execute(self, query: str, params: Any = None) -> None:
        raw = self._cursors.get(query)
        if raw is None or raw.closed:
            raw = self._cursors[query] = _raw(self.db, self.conn)
        self._last = raw
        db = self.db
        if db.execute_wrappers:  # query counting, the bench's recorder: Django's path
            db._prepare_cursor(raw).execute(query, params)
            return
        db.validate_no_broken_transaction()
        with db.wrap_database_errors:
            raw.execute(query, params, prepare=True)

    def fetchone(self) -> Any:
        with self.db.wrap_database_errors:
            return self._last.fetchone()

    def fetchall(self) -> list[Any]:
        with self.db.wrap_database_errors:
            return self._last.fetchall()  # type: ignore[no-any-return]

    @property
    def rowcount(self) -> int:
        return int(self._last.rowcount)

    @property
    def description(self) -> Any:
        return self._last.description


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
