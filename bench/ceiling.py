"""The ceiling: what PostgreSQL itself does on this machine for the smallest honest
unit of engine work, a claim inserted and completed in one transaction (unique text
key, jsonb result), from raw psycopg over `connections` connections."""

from __future__ import annotations

import threading
import time
import uuid

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
    counts = [0] * connections
    stop = threading.Event()

    def work(index: int) -> None:
        prefix = uuid.uuid4().hex
        with psycopg.connect(dsn) as conn:
            n = 0
            while not stop.is_set():
                key = f"{prefix}/{n}"
                with conn.transaction():
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
                n += 1
                counts[index] = n

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
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"DROP TABLE {TABLE}")
    return done / elapsed
