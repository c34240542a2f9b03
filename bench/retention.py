"""Retention benchmark: purge 1,000,000 events of finished runs in bounded
batches while a concurrent writer commits small step transactions on live runs.

    make bench-retention                        # 1,000,000 events
    DATABASE_URL=… .venv/bin/python bench/retention.py [--events N] [--per-run 100]

Runs in a database of its own (`<DATABASE_URL's name>_retention_bench`, created and
migrated when missing, emptied at every start). Seeds by INSERT … SELECT (the event
log's trigger allows INSERT): `--events / --per-run` succeeded runs that finished 200
days ago, each with two steps and `--per-run` events, plus 200 running runs for the
writer. Then it applies a 30/90/365-day policy with `runs.engine.retention.purge`
(the code `apply_retention` runs) and prints, per stage, rows per second; and for the
writer (a thread on its own connection that, in a loop, appends an event to a live
run and updates one of its steps in one transaction, as a step's finish does) the
commit latency before the purge and during it: the longest wait is the figure that
says whether the purge blocks live traffic.
"""

from __future__ import annotations

import argparse
import os
import statistics
import threading
import time
from typing import Any

import uidb  # bench/, the directory of this script

LIVE_RUNS = 200


def seed(cursor: Any, runs: int, per_run: int) -> None:
    cursor.execute("TRUNCATE runs_run, runs_retentionpurge, runs_retentionpolicychange CASCADE")
    cursor.execute(
        """
        INSERT INTO runs_run (id, workflow, version, input, status, plan_revision, last_seq,
            steps_remaining, result, error, ends_as, submitted_by, submitted_via,
            created_at, updated_at, finished_at)
        SELECT gen_random_uuid(), 'migrate-records', 1,
               jsonb_build_object('count', g, 'batch_size', 50), 'succeeded', 1, %s, 0,
               jsonb_build_object('migrated', g), '', '', 'cli', 'cli',
               now() - interval '201 days',
               now() - interval '200 days', now() - interval '200 days'
        FROM generate_series(1, %s) g
        """,
        [per_run, runs],
    )
    cursor.execute(
        """
        INSERT INTO runs_run (id, workflow, version, input, status, plan_revision, last_seq,
            steps_remaining, error, ends_as, submitted_by, submitted_via, created_at,
            updated_at)
        SELECT gen_random_uuid(), 'migrate-records', 1, '{}', 'running', 1, 0, 1, '', '',
               'cli', 'cli', now(), now()
        FROM generate_series(1, %s)
        """,
        [LIVE_RUNS],
    )
    cursor.execute(
        """
        INSERT INTO runs_step (run_id, key, name, kind, status, depends_on, pending_deps,
            compensates, plan_revision, claim_generation, attempts, deferred_attempts,
            max_attempts, result, error, created_at, started_at, finished_at)
        SELECT r.id, s.name, s.name, 'pure',
               CASE WHEN r.status = 'running' THEN 'running' ELSE 'succeeded' END,
               '{}', 0, '', 1, 1, 1, 0, 3,
               CASE WHEN r.status = 'running' THEN NULL
                    ELSE jsonb_build_object('ids', to_jsonb(array[1, 2, 3, 4, 5])) END,
               '', r.created_at, r.created_at, r.finished_at
        FROM runs_run r, (VALUES ('list_records'), ('report')) s(name)
        """
    )
    # run_submitted, then step events, then run_succeeded: what verify_history folds
    cursor.execute(
        """
        INSERT INTO runs_event (run_id, seq, type, step_id, attempt_number, schema_version,
            payload, created_at)
        SELECT r.id, g,
               CASE WHEN g = 1 THEN 'run_submitted' WHEN g = %s THEN 'run_succeeded'
                    WHEN g %% 3 = 0 THEN 'step_queued' WHEN g %% 3 = 1 THEN 'step_started'
                    ELSE 'step_succeeded' END,
               NULL, NULL, 1,
               CASE WHEN g = 1 THEN jsonb_build_object('workflow', 'migrate-records',
                        'version', 1, 'input', r.input, 'plan', '[]'::jsonb)
                    ELSE jsonb_build_object('step', 'list_records', 'n', g)
                    -- step_started's worker: history.fold reads it through the catalogue
                    || CASE WHEN g %% 3 = 1 THEN '{"worker": "bench"}'::jsonb
                            ELSE '{}'::jsonb END END,
               r.created_at
        FROM runs_run r, generate_series(1, %s) g
        WHERE r.status = 'succeeded'
        """,
        [per_run, per_run],
    )
    cursor.execute("ANALYZE")


class Writer(threading.Thread):
    """Small step commits on live runs, timed one by one."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.stop = threading.Event()
        self.samples: list[tuple[float, float]] = []  # (start, seconds)

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.url) as conn:
            live = [
                r
                for r in conn.execute(
                    "SELECT r.id, s.id FROM runs_run r JOIN runs_step s ON s.run_id = r.id "
                    "WHERE r.status = 'running' AND s.name = 'list_records'"
                ).fetchall()
            ]
            conn.commit()
            i = 0
            while not self.stop.is_set():
                run_id, step_id = live[i % len(live)]
                i += 1
                start = time.monotonic()
                with conn.transaction():
                    conn.execute(
                        """
                        WITH seq AS (UPDATE runs_run SET last_seq = last_seq + 1
                                     WHERE id = %s RETURNING last_seq)
                        INSERT INTO runs_event (run_id, seq, type, step_id, schema_version,
                            payload, created_at)
                        SELECT %s, seq.last_seq, 'step_started', %s, 1, '{}', now() FROM seq
                        """,
                        [run_id, run_id, step_id],
                    )
                    conn.execute(
                        "UPDATE runs_step SET attempts = attempts WHERE id = %s", [step_id]
                    )
                self.samples.append((start, time.monotonic() - start))


def latency(samples: list[tuple[float, float]], since: float, until: float) -> str:
    waits = sorted(s for t, s in samples if since <= t < until)
    if not waits:
        return "no commits"
    p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
    return (
        f"{len(waits)} commits, median {statistics.median(waits) * 1000:.1f} ms, "
        f"p99 {p99 * 1000:.1f} ms, longest {waits[-1] * 1000:.1f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--per-run", type=int, default=100)
    parser.add_argument("--batch", type=int, default=None, help="RUNS_RETENTION_BATCH")
    parser.add_argument("--baseline", type=float, default=5.0, help="seconds before purge")
    args = parser.parse_args()

    uidb.use_bench_database(suffix="_retention_bench")
    uidb.setup_django()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from runs.engine import retention
    from runs.models import Event, RetentionPolicy

    call_command("migrate", verbosity=0)
    runs = args.events // args.per_run
    t0 = time.monotonic()
    with connection.cursor() as cursor:
        seed(cursor, runs, args.per_run)
    total = Event.objects.count()
    print(f"seeded {runs} finished runs, {total} events in {time.monotonic() - t0:.1f}s")

    RetentionPolicy.objects.filter(workflow="").update(
        payload_days=30, event_days=90, dedup_days=365, enabled=True
    )
    policy = RetentionPolicy.objects.get(workflow="")
    batch = args.batch or settings.RUNS_RETENTION_BATCH

    writer = Writer(os.environ["DATABASE_URL"])
    writer.start()
    time.sleep(args.baseline)  # the writer's latency without a purge
    start = time.monotonic()
    stage_times: dict[str, float] = {}
    result = retention.purge(policy=policy, batch=batch, timings=stage_times)
    end = time.monotonic()
    time.sleep(1)
    writer.stop.set()
    writer.join()

    left = Event.objects.filter(run__status="succeeded").count()
    print(
        f"purge of policy {policy.name} (batch {batch}): {end - start:.1f}s, "
        f"{result.batches} transactions; {left} events of finished runs left"
    )
    for stage in retention.STAGES:
        counts = result.counts.get(stage, {})
        rows = max((v for k, v in counts.items() if k != "runs" and k != "steps"), default=0)
        seconds = stage_times.get(stage, 0.0)
        rate = f"{rows / seconds:,.0f} rows/s" if seconds > 0 and rows else "-"
        print(f"  {stage:9} {seconds:7.1f}s  {rate:>16}  {counts}")
    print(f"writer before the purge: {latency(writer.samples, 0, start)}")
    print(f"writer during the purge: {latency(writer.samples, start, end)}")


if __name__ == "__main__":
    main()
