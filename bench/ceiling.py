"""The ceiling: what PostgreSQL itself does on this machine for the smallest honest
unit of engine work, a claim inserted and completed in one transaction (unique text
key, jsonb result), from raw psycopg over `connections` connections.

And the map's floor: a map item's own rows (its claim and the example's target record)
in one transaction, raw psycopg again, on the real tables. The map can approach its
floor, never pass it; how far the floor itself is below the ceiling is the schema's
price (two rows, their indexes, foreign keys and the item fence), not the engine's."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg

TABLE = "bench_ceiling_claim"


def ceiling(dsn: str, connections: int = 2, seconds: float = 5.0) -> float:
    """Transactions per second (each: INSERT the claim, UPDATE it to succeeded with a
    jsonb result, COMMIT)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
        conn.execute(
            f"CREATE TABLE {TABLE} (id bigserial PRIMARY KEY, key text NOT NULL UNIQUE, "
            "status text NOT NULL, result jsonb, created_at timestamptz NOT NULL DEFAULT now(), "
            "completed_at timestamptz)"
        )

    def claim(conn: psycopg.Connection[Any], key: str, n: int) -> None:
        row = conn.execute(
            f"INSERT INTO {TABLE} (key, status) VALUES (%s, 'in_flight') "
            "ON CONFLICT (key) DO NOTHING RETURNING id",
            [key],
        ).fetchone()
        assert row is not None
        conn.execute(
            f"UPDATE {TABLE} SET status = 'succeeded', result = %s::jsonb, "
            "completed_at = now() WHERE id = %s AND status = 'in_flight'",
            ['{"ok": true}', row[0]],
        )

    try:
        return _rate(dsn, connections, seconds, claim)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {TABLE}")


# The floor's claim keys and item keys start with this, so its rows can be found.
FLOOR_PREFIX = "floor/"


def map_floor(
    dsn: str,
    *,
    run_id: uuid.UUID,
    step_id: int,
    attempt_id: int,
    connections: int = 2,
    seconds: float = 5.0,
) -> float:
    """The floor of a map item: its own two rows, the claim (already succeeded, as an
    item's is) and the example's target record, inserted in one transaction from raw
    psycopg on the real tables (their constraints, foreign keys and the item fence's
    trigger, against a running batch attempt): items per second before any engine's
    Python, Django's ORM or the broker. Leaves its rows; the caller removes them."""

    def item(conn: psycopg.Connection[Any], key: str, n: int) -> None:
        conn.execute(
            "INSERT INTO runs_claim (key, run_id, step_id, item_key, kind, status, attempt_id, "
            "error, resolved_by, resolution_note, created_at, completed_at) "
            "VALUES (%s, %s, %s, %s, 'transactional', 'succeeded', %s, '', '', '', now(), now()) "
            "RETURNING id",
            [key, run_id, step_id, key, attempt_id],
        ).fetchone()
        conn.execute(
            "INSERT INTO examples_targetrecord (record_id, run_id, payload) VALUES (%s, %s, %s) "
            "RETURNING id, migrated_at",
            [n, run_id, f"record-{n}"],
        ).fetchone()

    return _rate(dsn, connections, seconds, item, prefix=FLOOR_PREFIX)


def _rate(
    dsn: str,
    connections: int,
    seconds: float,
    transaction: Callable[[psycopg.Connection[Any], str, int], None],
    prefix: str = "",
) -> float:
    """Transactions per second of `transaction(conn, unique key, n)`, each committed, over
    `connections` threads, measured for `seconds` after half a second's warm-up."""
    counts = [0] * connections
    errors: list[BaseException] = []
    stop = threading.Event()

    def work(index: int) -> None:
        own = prefix + uuid.uuid4().hex
        try:
            with psycopg.connect(dsn) as conn:
                n = 0
                while not stop.is_set():
                    with conn.transaction():
                        transaction(conn, f"{own}/{n}", n)
                    n += 1
                    counts[index] = n
        except BaseException as exc:  # a dead thread would read as a slow rate
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(connections)]
    for t in threads:
        t.start()
    time.sleep(0.5)  # connected and warm
    start_counts = sum(counts)
    t0 = time.monotonic()
    time.sleep(seconds)
    done = sum(counts) - start_counts
    elapsed = time.monotonic() - t0
    stop.set()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return done / elapsed
