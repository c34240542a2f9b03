"""What the pause check in the start statement costs (runs/engine/attempts/start.sql):
the sub-select alone, prepared, timed against a bare round trip on one connection, with
no pause and with 50 pauses of other workflows in runs_pause.

    DATABASE_URL=… .venv/bin/python bench/pause_check.py [--executions 10000]

Figures, never assertions. The database needs at least one step (any bench run leaves
thousands); the pauses it adds are removed again.
"""

from __future__ import annotations

import argparse
import statistics
import time

import common  # bench/, the directory of this script; sets Django up
import psycopg

# The check as start.sql writes it, for one step.
CHECK = """
SELECT NOT EXISTS (
    SELECT 1 FROM runs_pause p
    WHERE p.workflow = (SELECT runs_run.workflow FROM runs_run
                        WHERE runs_run.id = s.run_id)
      AND p.step IN ('', s.name))
FROM runs_step s WHERE s.id = %s
"""
BARE = "SELECT true FROM runs_step s WHERE s.id = %s"


def per_execution_us(conn: psycopg.Connection, sql: str, step_id: int, n: int) -> float:
    with conn.cursor() as c:
        for _ in range(200):  # warm: prepared (prepare_threshold=0) and cached
            c.execute(sql, (step_id,), prepare=True)
        start = time.perf_counter()
        for _ in range(n):
            c.execute(sql, (step_id,), prepare=True)
            c.fetchone()
        return (time.perf_counter() - start) / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=10000)
    args = parser.parse_args()
    with psycopg.connect(common.dsn(), autocommit=True) as conn:
        conn.execute("SET plan_cache_mode = force_generic_plan")
        row = conn.execute("SELECT max(id) FROM runs_step").fetchone()
        if not row or row[0] is None:
            raise SystemExit("no step in the database: run bench/engine.py on it first")
        step_id = int(row[0])
        figures = {}
        for label, pauses in (("no pause", 0), ("50 pauses of other workflows", 50)):
            conn.execute("DELETE FROM runs_pause WHERE actor = 'bench-pause-check'")
            for i in range(pauses):
                conn.execute(
                    "INSERT INTO runs_pause (workflow, step, actor, reason, created_at)"
                    " VALUES (%s, '', 'bench-pause-check', 'bench', now())",
                    (f"bench-other-{i}",),
                )
            # In turn, five times; the median of each: the machine's noise moves both.
            bares, checks = [], []
            for _ in range(5):
                bares.append(per_execution_us(conn, BARE, step_id, args.executions))
                checks.append(per_execution_us(conn, CHECK, step_id, args.executions))
            figures[label] = (statistics.median(bares), statistics.median(checks))
        conn.execute("DELETE FROM runs_pause WHERE actor = 'bench-pause-check'")
    print(f"{'runs_pause holds':<32} {'bare (us)':>10} {'with check (us)':>16} {'check (us)':>11}")
    for label, (bare, check) in figures.items():
        print(f"{label:<32} {bare:>10.1f} {check:>16.1f} {check - bare:>11.1f}")


if __name__ == "__main__":
    main()
