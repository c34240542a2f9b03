"""Partitioning benchmark: would a time-partitioned event log let retention drop
whole partitions instead of deleting rows, and keep its guarantees?

    DATABASE_URL=… .venv/bin/python bench/partitioning.py [--events 10000000]
        [--per-run 100] [--window-days 14] [--purge-seconds 90] [--batch N]

Runs in a database of its own (`<DATABASE_URL's name>_partition_bench`, created and
migrated when missing, emptied at every start), as bench/retention.py does. It seeds
`--events / --per-run` runs of four workflows whose event windows are 30, 90 and 365
days and "keep" (a disabled policy), finishing over 15 months, 5% of them running for
20 to 180 days and 2% still running, each with 4 steps, a claim per started step and
`--per-run` events spread over the run's life. Events are inserted by INSERT … SELECT
in windows of `--window-days`, in time order (as a live system appends them, the runs
interleaved), into runs_event; then it reports sizes (heap, each index, claims) and the
timeline and claim-probe queries (EXPLAIN (ANALYZE, BUFFERS)), builds a copy of the
log partitioned by month of the event's `created_at` (bench_event_part), loads the same
events into it with the same statements, and reports the insert rates, the timeline
on it, what share of each monthly partition belongs to runs past their workflow's event
window (a partition can be dropped whole only at 100%; the same for partitions by the
run's creation month and by workflow and month), the read-and-fold of one partition
(what a drop still needs, the summaries), its DETACH and DROP, and the current purge
(retention's event stage) on runs_event for `--purge-seconds`. A table of the figures
ends the output.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import uidb  # bench/, the directory of this script

PART = "bench_event_part"
RUNS = "bench_part_runs"  # the seeded runs' shape: n (for chunks), times, event spacing


@dataclass(frozen=True)
class Workflow:
    name: str
    share: float  # of the runs
    payload_days: int
    event_days: int | None  # None: kept (its policy is disabled)
    dedup_days: int


WORKFLOWS = (
    Workflow("migrate-records", 0.40, 30, 30, 90),
    Workflow("merge-change", 0.30, 30, 90, 365),
    Workflow("charge-payment", 0.20, 30, 365, 730),
    Workflow("agent-refund", 0.10, 30, None, 730),
)
STEPS = (("prepare", "pure"), ("apply", "idempotent"), ("verify", "pure"), ("report", "pure"))

FIGURES: list[tuple[str, str]] = []


def figure(measure: str, value: str) -> None:
    FIGURES.append((measure, value))
    print(f"  {measure}: {value}", flush=True)


def mb(n: float) -> str:
    return f"{n / 1024 / 1024:,.0f} MB"


# --- seeding -------------------------------------------------------------------------
def seed_runs(cursor: Any, runs: int, per_run: int) -> None:
    """The runs (and their shape in RUNS), 4 steps each, a claim per started step."""
    cursor.execute(f"DROP TABLE IF EXISTS {PART}, {RUNS}")
    cursor.execute("DROP SEQUENCE IF EXISTS bench_event_part_id_seq")
    cursor.execute("TRUNCATE runs_run, runs_retentionpurge CASCADE")
    cursor.execute("SELECT setseed(0.42)")
    bounds, cut = [], 0.0
    for wf in WORKFLOWS:
        cut += wf.share
        bounds.append(f"WHEN w < {cut:.4f} THEN '{wf.name}'")
    cursor.execute(
        f"""
        CREATE TABLE {RUNS} AS
        WITH base AS (
            SELECT g AS n, gen_random_uuid() AS id, random() AS w, random() AS s,
                   random() AS l, random() AS f, random() AS d
            FROM generate_series(1, %(runs)s) g
        ), shaped AS (
            SELECT n, id,
                   CASE {" ".join(bounds)} ELSE '{WORKFLOWS[-1].name}' END AS workflow,
                   CASE WHEN s < 0.02 THEN 'running' WHEN s < 0.09 THEN 'failed'
                        WHEN s < 0.12 THEN 'cancelled' ELSE 'succeeded' END AS status,
                   -- one in 20 runs for 20 to 180 days, the rest under 2 hours
                   CASE WHEN l < 0.05 THEN interval '20 days' + d * interval '160 days'
                        ELSE d * interval '2 hours' END AS duration,
                   statement_timestamp() - f * interval '455 days' AS finished, l, d
            FROM base
        )
        SELECT n, id, workflow, status,
               CASE WHEN status = 'running' THEN NULL ELSE finished END AS finished_at,
               CASE WHEN status = 'running' THEN statement_timestamp()
                    - CASE WHEN l < 0.5 THEN d * interval '400 days' ELSE d * interval '2 hours'
                      END
                    ELSE finished - duration END AS created_at,
               statement_timestamp() AS seeded_at
        FROM shaped
        """,
        {"runs": runs},
    )
    cursor.execute(
        f"""
        ALTER TABLE {RUNS} ADD PRIMARY KEY (n);
        ALTER TABLE {RUNS} ADD COLUMN ended_at timestamptz, ADD COLUMN step_s float8;
        UPDATE {RUNS} SET ended_at = coalesce(finished_at, seeded_at);
        UPDATE {RUNS} SET step_s = greatest(extract(epoch FROM ended_at - created_at), 1.0)
                                   / greatest(%(per_run)s - 1, 1);
        CREATE UNIQUE INDEX ON {RUNS} (id);
        ANALYZE {RUNS};
        """,
        {"per_run": per_run},
    )
    cursor.execute(
        f"""
        INSERT INTO runs_run (id, workflow, version, input, status, plan_revision, last_seq,
            steps_remaining, result, error, ends_as, submitted_by, submitted_via,
            created_at, updated_at, finished_at)
        SELECT id, workflow, 1, jsonb_build_object('n', n), status, 1, %(per_run)s,
               CASE WHEN status = 'running' THEN 1 ELSE 0 END,
               CASE WHEN status = 'succeeded' THEN jsonb_build_object('n', n) END,
               CASE WHEN status = 'failed' THEN 'report failed' ELSE '' END, '',
               'cli', 'cli', created_at, ended_at, finished_at
        FROM {RUNS} ORDER BY created_at
        """,
        {"per_run": per_run},
    )
    values = ", ".join(f"({i}, '{name}', '{kind}')" for i, (name, kind) in enumerate(STEPS, 1))
    last = len(STEPS)
    cursor.execute(
        f"""
        INSERT INTO runs_step (run_id, key, name, kind, status, depends_on, pending_deps,
            compensates, plan_revision, claim_generation, attempts, deferred_attempts,
            max_attempts, result, error, created_at, started_at, finished_at)
        SELECT b.id, s.name, s.name, s.kind, x.status, '{{}}', 0, '', 1, 1,
               CASE WHEN x.status = 'pending' THEN 0 ELSE 1 END, 0, 3,
               CASE WHEN x.status = 'succeeded' THEN jsonb_build_object('ok', s.i) END,
               CASE WHEN x.status = 'failed' THEN 'boom' ELSE '' END,
               b.created_at, CASE WHEN x.status <> 'pending' THEN b.created_at END,
               CASE WHEN x.status IN ('succeeded', 'failed') THEN b.ended_at END
        FROM {RUNS} b CROSS JOIN (VALUES {values}) s(i, name, kind)
        CROSS JOIN LATERAL (SELECT CASE
            WHEN s.i < {last} THEN 'succeeded'
            WHEN b.status = 'running' THEN 'running'
            WHEN b.status = 'failed' THEN 'failed'
            WHEN b.status = 'cancelled' THEN 'pending'
            ELSE 'succeeded' END AS status) x
        ORDER BY b.created_at, s.i
        """
    )
    cursor.execute(
        """
        INSERT INTO runs_claim (key, run_id, step_id, item_key, kind, status, attempt_id,
            result, error, evidence, resolved_by, resolved_at, resolution_note,
            probe_requested_at, probe_after, probed_at, probe_lease_expires_at, probe_tries,
            created_at, unresolved_at, completed_at)
        SELECT s.run_id || '/' || s.name || '@1', s.run_id, s.id, NULL, s.kind, s.status,
               NULL, s.result, s.error, NULL, '', NULL, '', NULL, NULL, NULL, NULL, 0,
               s.started_at, NULL, s.finished_at
        FROM runs_step s WHERE s.status IN ('succeeded', 'failed') ORDER BY s.id
        """
    )


def event_windows(cursor: Any, days: int) -> list[tuple[datetime, datetime]]:
    cursor.execute(f"SELECT min(created_at), max(ended_at) FROM {RUNS}")
    first, last = cursor.fetchone()
    cursor.execute(
        "SELECT g, g + make_interval(days => %s) FROM generate_series("
        "date_trunc('day', %s::timestamptz), %s::timestamptz, make_interval(days => %s)) g",
        [days, first, last, days],
    )
    return list(cursor.fetchall())


# An event of run b numbered g happens at b.created_at + (g - 1) * b.step_s seconds: the
# run's events spread evenly over its life. A window's statement generates, per run
# alive in it, a conservative range of g and keeps the events that fall in the window
# (the same expression decides both), in time order.
EVENTS_SQL = """
    INSERT INTO {table} (run_id, seq, type, step_id, attempt_number, schema_version,
        payload, created_at)
    SELECT e.id, e.g,
           CASE WHEN e.g = 1 THEN 'run_submitted'
                WHEN e.g = %(per_run)s AND e.status <> 'running' THEN 'run_' || e.status
                WHEN e.g %% 3 = 0 THEN 'step_queued' WHEN e.g %% 3 = 1 THEN 'step_started'
                ELSE 'step_succeeded' END,
           NULL, NULL, 1,
           CASE WHEN e.g = 1 THEN jsonb_build_object('workflow', e.workflow, 'version', 1,
                    'input', jsonb_build_object('n', e.n), 'plan', '[]'::jsonb)
                ELSE jsonb_build_object('step', (ARRAY['prepare', 'apply', 'verify',
                    'report'])[1 + e.g %% 4], 'n', e.g)
                    -- step_started's worker: history.fold reads it through the catalogue
                    || CASE WHEN e.g %% 3 = 1 THEN '{{"worker": "bench"}}'::jsonb
                            ELSE '{{}}'::jsonb END END,
           e.at
    FROM (
        SELECT b.n, b.id, b.status, b.workflow, g,
               b.created_at + (g - 1) * b.step_s * interval '1 second' AS at
        FROM {runs} b,
             generate_series(
                 greatest(1, floor(extract(epoch FROM %(start)s - b.created_at) / b.step_s)::int),
                 least(%(per_run)s,
                       ceil(extract(epoch FROM %(end)s - b.created_at) / b.step_s)::int + 1)) g
        WHERE b.created_at < %(end)s AND b.ended_at >= %(start)s
    ) e
    WHERE e.at >= %(start)s AND e.at < %(end)s
    ORDER BY e.at
"""


def load_events(
    cursor: Any, table: str, windows: list[tuple[datetime, datetime]], per_run: int
) -> tuple[int, float]:
    """Insert every window's events into `table`; (events, seconds)."""
    sql = EVENTS_SQL.format(table=table, runs=RUNS)
    total, started = 0, time.monotonic()
    for i, (start, end) in enumerate(windows, 1):
        cursor.execute(sql, {"start": start, "end": end, "per_run": per_run})
        total += cursor.rowcount
        if i % 5 == 0 or i == len(windows):
            elapsed = time.monotonic() - started
            print(
                f"    {table}: window {i}/{len(windows)}, {total:,} events, "
                f"{elapsed:.0f}s ({total / elapsed:,.0f}/s)",
                flush=True,
            )
    return total, time.monotonic() - started


# --- the partitioned copy ------------------------------------------------------------
def create_partitioned(cursor: Any) -> list[str]:
    """bench_event_part: runs_event's columns, partitioned by month of created_at.
    A unique or primary key of a partitioned table must contain the partition key: the
    primary key becomes (id, created_at), the unique (run_id, seq) becomes (run_id,
    seq, created_at), which holds per partition only."""
    cursor.execute(
        f"""
        CREATE SEQUENCE bench_event_part_id_seq;
        CREATE TABLE {PART} (LIKE runs_event) PARTITION BY RANGE (created_at);
        ALTER TABLE {PART} ALTER id SET DEFAULT nextval('bench_event_part_id_seq');
        ALTER TABLE {PART} ADD PRIMARY KEY (id, created_at);
        ALTER TABLE {PART} ADD CONSTRAINT bench_part_run_seq_unique
            UNIQUE (run_id, seq, created_at);
        CREATE INDEX bench_part_run_type_idx ON {PART} (run_id, type, seq);
        CREATE INDEX bench_part_step_idx ON {PART} (step_id);
        ALTER TABLE {PART} ADD FOREIGN KEY (run_id) REFERENCES runs_run (id)
            DEFERRABLE INITIALLY DEFERRED;
        ALTER TABLE {PART} ADD FOREIGN KEY (step_id) REFERENCES runs_step (id)
            DEFERRABLE INITIALLY DEFERRED;
        CREATE TRIGGER bench_part_append_only BEFORE UPDATE OR DELETE ON {PART}
            FOR EACH ROW EXECUTE FUNCTION runs_event_append_only();
        """
    )
    cursor.execute(
        f"SELECT g, g + interval '1 month' FROM generate_series("
        f"(SELECT date_trunc('month', min(created_at)) FROM {RUNS}),"
        f"(SELECT date_trunc('month', max(ended_at)) FROM {RUNS}), interval '1 month') g"
    )
    names = []
    for start, end in cursor.fetchall():
        name = f"{PART}_{start:%Y_%m}"
        cursor.execute(
            f"CREATE TABLE {name} PARTITION OF {PART} FOR VALUES FROM (%s) TO (%s)",
            [start, end],
        )
        names.append(name)
    return names


# --- sizes and queries ---------------------------------------------------------------
def relation_sizes(cursor: Any, table: str) -> tuple[int, int, list[tuple[str, int]]]:
    """(heap bytes, toast and maps bytes, [(index, bytes)]); a partitioned table's are
    summed over its partitions."""
    cursor.execute(
        """
        SELECT coalesce(sum(pg_relation_size(relid)), 0),
               coalesce(sum(pg_table_size(relid) - pg_relation_size(relid)), 0)
        FROM (SELECT relid FROM pg_partition_tree(%s::regclass) WHERE isleaf
              UNION SELECT %s::regclass WHERE NOT EXISTS (
                  SELECT 1 FROM pg_partitioned_table WHERE partrelid = %s::regclass)) t
        """,
        [table, table, table],
    )
    heap, rest = cursor.fetchone()
    cursor.execute(
        """
        SELECT i.indexrelid::regclass::text,
               CASE WHEN c.relkind = 'I' THEN
                   (SELECT coalesce(sum(pg_relation_size(t.relid)), 0)
                    FROM pg_partition_tree(i.indexrelid) t WHERE t.isleaf)
               ELSE pg_relation_size(i.indexrelid) END
        FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
        WHERE i.indrelid = %s::regclass ORDER BY 1
        """,
        [table],
    )
    return int(heap), int(rest), [(name, int(size)) for name, size in cursor.fetchall()]


def report_sizes(cursor: Any, table: str, label: str) -> int:
    heap, rest, indexes = relation_sizes(cursor, table)
    figure(f"{label}: heap", mb(heap) + (f" (+ {mb(rest)} toast/maps)" if rest > 8192 else ""))
    for name, size in indexes:
        figure(f"{label}: index {name}", mb(size))
    total = heap + rest + sum(s for _, s in indexes)
    figure(f"{label}: total", mb(total))
    return total


def explain(cursor: Any, sql: str, params: list[Any]) -> tuple[float, float, int]:
    """(execution ms, planning ms, shared buffers hit + read) of one EXPLAIN ANALYZE."""
    cursor.execute("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + sql, params)
    raw = cursor.fetchone()[0]
    top = (json.loads(raw) if isinstance(raw, str) else raw)[0]
    plan = top["Plan"]
    return (
        float(top["Execution Time"]),
        float(top["Planning Time"]),
        int(plan.get("Shared Hit Blocks", 0)) + int(plan.get("Shared Read Blocks", 0)),
    )


def timed_query(cursor: Any, label: str, sql: str, params: list[list[Any]]) -> None:
    samples = [explain(cursor, sql, p) for p in params]
    run_ms = sorted(s[0] for s in samples)
    plan_ms = statistics.median(s[1] for s in samples)
    buffers = statistics.median(s[2] for s in samples)
    figure(
        label,
        f"median {statistics.median(run_ms):.2f} ms, max {run_ms[-1]:.2f} ms "
        f"(planning {plan_ms:.2f} ms, {buffers:.0f} buffers) over {len(samples)} runs",
    )


TIMELINE = "SELECT seq, type, payload, created_at FROM {table} WHERE run_id = %s ORDER BY seq"
# The same with the time range of the run (its row has both ends): prunes to the
# partitions the run's life spans.
TIMELINE_BOUNDED = (
    "SELECT seq, type, payload, created_at FROM {table} WHERE run_id = %s "
    "AND created_at >= %s AND created_at <= %s ORDER BY seq"
)
CLAIM_PROBE = "SELECT id, status, result, completed_at FROM runs_claim WHERE key = %s"


# --- what a partition drop could take ------------------------------------------------
def policy_values() -> str:
    return ", ".join(
        f"('{wf.name}', {wf.event_days if wf.event_days is not None else 'NULL'})"
        for wf in WORKFLOWS
    )


def droppable(cursor: Any, group: str, source: str) -> list[tuple[Any, ...]]:
    """Per group: events, events of runs past their workflow's event window (finished,
    policy enabled), of running runs, of kept runs, and when the last of its events
    passes its window (NULL: never, a run is kept or still running)."""
    cursor.execute(
        f"""
        WITH pol(workflow, event_days) AS (VALUES {policy_values()})
        SELECT {group} AS part, sum(x.n) AS events,
               sum(x.n) FILTER (WHERE r.finished_at IS NOT NULL AND p.event_days IS NOT NULL
                   AND r.finished_at < r.seeded_at - make_interval(days => p.event_days)),
               sum(x.n) FILTER (WHERE r.finished_at IS NULL),
               sum(x.n) FILTER (WHERE p.event_days IS NULL),
               CASE WHEN bool_and(r.finished_at IS NOT NULL AND p.event_days IS NOT NULL)
                    THEN max(r.finished_at + make_interval(days => p.event_days)) END
        FROM {source} JOIN {RUNS} r ON r.id = x.run_id JOIN pol p ON p.workflow = r.workflow
        GROUP BY 1 ORDER BY 1
        """
    )
    return list(cursor.fetchall())


def summarize_droppable(rows: list[tuple[Any, ...]], seeded_at: datetime, label: str) -> None:
    parts = len(rows)
    if not parts:
        return
    whole = sum(1 for r in rows if r[2] == r[1])
    events = sum(r[1] for r in rows)
    past = sum(r[2] or 0 for r in rows)
    in_whole = sum(r[1] for r in rows if r[2] == r[1])
    figure(
        f"{label}: partitions droppable whole now",
        f"{whole} of {parts} ({in_whole:,} of the {past:,} events past their window; "
        f"{events:,} events in all)",
    )
    never = sum(1 for r in rows if r[5] is None)
    figure(
        f"{label}: partitions with no drop date yet (a kept or still running run)",
        f"{never} of {parts}",
    )


def print_partitions(rows: list[tuple[Any, ...]], seeded_at: datetime) -> None:
    print("    partition                          events   past%  running%  kept%  whole drop")
    for part, events, past, running, kept, at in rows:
        when = "never" if at is None else ("now" if at <= seeded_at else f"{at:%Y-%m-%d}")
        print(
            f"    {part!s:32} {events:9,} {100 * (past or 0) / events:6.1f} "
            f"{100 * (running or 0) / events:8.2f} {100 * (kept or 0) / events:6.1f}  {when}"
        )


def fold_partition(cursor: Any, name: str) -> tuple[int, int, float, float]:
    """Read a partition's events in (run, seq) order and fold them into projections, as
    retention must before its events go: (events, runs, read seconds, fold seconds)."""
    from runs.record.history import Projection, fold

    started = time.monotonic()
    cursor.execute(f"SELECT run_id, seq, type, payload FROM {name} ORDER BY run_id, seq")
    rows = cursor.fetchall()
    read = time.monotonic() - started
    started = time.monotonic()
    projections: dict[Any, Projection] = {}
    for run_id, _seq, type_, payload in rows:
        p = projections.get(run_id)
        if p is None:
            p = projections[run_id] = Projection()
        fold(p, type_, json.loads(payload) if isinstance(payload, str) else payload)
    for p in projections.values():
        p.to_json()
    return len(rows), len(projections), read, time.monotonic() - started


# --- the current purge ---------------------------------------------------------------
def purge_events(policy: Any, batch: int, seconds: float) -> tuple[int, int, int, float, float]:
    """Retention's event stage (the batch `purge()` runs for it, each in its own
    transaction) for at most `seconds`: (events, runs, batches, seconds, longest batch)."""
    from django.db import transaction

    from runs.engine import retention

    run_batch = retention._STAGES["events"][0]
    events = runs = batches = 0
    longest = 0.0
    started = time.monotonic()
    while time.monotonic() - started < seconds:
        t0 = time.monotonic()
        with transaction.atomic():
            done = run_batch(policy, batch)
        if not done:
            break
        longest = max(longest, time.monotonic() - t0)
        events += done.get("events_deleted", 0)
        runs += done.get("runs", 0)
        batches += 1
    return events, runs, batches, time.monotonic() - started, longest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=10_000_000)
    parser.add_argument("--per-run", type=int, default=100)
    parser.add_argument("--window-days", type=int, default=14, help="days per seeding chunk")
    parser.add_argument("--purge-seconds", type=float, default=90.0)
    parser.add_argument("--batch", type=int, default=None, help="RUNS_RETENTION_BATCH")
    parser.add_argument("--samples", type=int, default=25, help="runs per timed query")
    args = parser.parse_args()

    uidb.use_bench_database(suffix="_partition_bench")
    uidb.setup_django()
    from django.conf import settings
    from django.core.management import call_command
    from django.db import connection

    from runs.models import RetentionPolicy

    call_command("migrate", verbosity=0)
    runs = args.events // args.per_run
    batch = args.batch or int(settings.RUNS_RETENTION_BATCH)
    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        print(cursor.fetchone()[0])

        # 1. seeding
        print(f"seeding {runs:,} runs of {args.per_run} events", flush=True)
        t0 = time.monotonic()
        seed_runs(cursor, runs, args.per_run)
        figure("seeding runs, steps, claims", f"{time.monotonic() - t0:.1f} s")
        windows = event_windows(cursor, args.window_days)
        events, seconds = load_events(cursor, "runs_event", windows, args.per_run)
        figure(
            "seeding runs_event (time order, INSERT … SELECT)",
            f"{events:,} events in {seconds:.1f} s ({events / seconds:,.0f} events/s, "
            f"{len(windows)} chunks of {args.window_days} days)",
        )
        t0 = time.monotonic()
        cursor.execute("VACUUM (ANALYZE) runs_event")
        cursor.execute("VACUUM (ANALYZE) runs_claim")
        cursor.execute("ANALYZE")
        figure("VACUUM ANALYZE after the seed", f"{time.monotonic() - t0:.1f} s")
        cursor.execute(f"SELECT max(seeded_at) FROM {RUNS}")
        seeded_at = cursor.fetchone()[0]

        # 2. sizes and the queries that matter
        print("sizes", flush=True)
        for table in ("runs_run", "runs_step", "runs_claim"):
            cursor.execute(f"SELECT count(*) FROM {table}")
            figure(f"{table}: rows", f"{cursor.fetchone()[0]:,}")
        figure("runs_event: rows", f"{events:,}")
        event_total = report_sizes(cursor, "runs_event", "runs_event")
        report_sizes(cursor, "runs_claim", "runs_claim")
        step = max(1, runs // args.samples)
        cursor.execute(
            f"SELECT id, created_at, ended_at FROM {RUNS} WHERE n %% %s = 1 ORDER BY n LIMIT %s",
            [step, args.samples],
        )
        sample = cursor.fetchall()
        timed_query(
            cursor,
            "runs_event: a run's timeline by run_id, seq",
            TIMELINE.format(table="runs_event"),
            [[r[0]] for r in sample],
        )
        cursor.execute(
            "SELECT key FROM runs_claim WHERE run_id = ANY(%s) AND item_key IS NULL",
            [[r[0] for r in sample]],
        )
        keys = [[k] for (k,) in cursor.fetchall()][: args.samples]
        timed_query(cursor, "runs_claim: a claim probe by key", CLAIM_PROBE, keys)

        # 4. the partitioned copy
        print("the partitioned copy", flush=True)
        names = create_partitioned(cursor)
        figure(f"{PART}: monthly partitions", f"{len(names)} ({names[0]} … {names[-1]})")
        part_events, part_seconds = load_events(cursor, PART, windows, args.per_run)
        figure(
            f"{PART}: loading the same events",
            f"{part_events:,} events in {part_seconds:.1f} s "
            f"({part_events / part_seconds:,.0f} events/s; runs_event "
            f"{events / seconds:,.0f}/s: {100 * (part_seconds / seconds - 1):+.0f}% time)",
        )
        cursor.execute(f"VACUUM (ANALYZE) {PART}")
        part_total = report_sizes(cursor, PART, PART)
        figure(f"{PART}: total vs runs_event", f"{100 * (part_total / event_total - 1):+.1f}%")
        timed_query(
            cursor,
            f"{PART}: a run's timeline by run_id (every partition probed)",
            TIMELINE.format(table=PART),
            [[r[0]] for r in sample],
        )
        timed_query(
            cursor,
            f"{PART}: the timeline bounded by the run's created/finished times",
            TIMELINE_BOUNDED.format(table=PART),
            [list(r) for r in sample],
        )

        print("what a drop could take, per monthly partition (as of the seed)", flush=True)
        by_event = droppable(
            cursor,
            "x.part",
            f"(SELECT tableoid::regclass::text AS part, run_id, count(*) AS n FROM {PART} "
            "GROUP BY 1, 2) x",
        )
        print_partitions(by_event, seeded_at)
        summarize_droppable(by_event, seeded_at, "by event month (the prototype)")
        by_run = droppable(
            cursor,
            "to_char(date_trunc('month', r.created_at), 'YYYY-MM')",
            f"(SELECT id AS run_id, {int(args.per_run)}::bigint AS n FROM {RUNS}) x",
        )
        print("    by the run's creation month:")
        print_partitions(by_run, seeded_at)
        summarize_droppable(by_run, seeded_at, "by run creation month")
        by_workflow = droppable(
            cursor,
            "r.workflow || ' ' || x.part",
            f"(SELECT to_char(date_trunc('month', created_at), 'YYYY-MM') AS part, run_id, "
            f"count(*) AS n FROM {PART} GROUP BY 1, 2) x",
        )
        summarize_droppable(by_workflow, seeded_at, "by workflow, then event month")
        for wf in WORKFLOWS:
            mine = [r for r in by_workflow if str(r[0]).startswith(wf.name + " ")]
            summarize_droppable(mine, seeded_at, f"  {wf.name} ({wf.event_days or 'keep'})")

        # the partition that would go first: the one with most events past their window
        target = max(by_event, key=lambda r: r[2] or 0)[0]
        n, fold_runs, read, fold_s = fold_partition(cursor, target)
        figure(
            f"read + fold of {target} (what a drop still needs first)",
            f"{n:,} events of {fold_runs:,} runs: read {read:.1f} s, fold {fold_s:.1f} s "
            f"({n / (read + fold_s):,.0f} events/s, summaries not written)",
        )
        t0 = time.monotonic()
        cursor.execute(f"ALTER TABLE {PART} DETACH PARTITION {target}")
        detach = time.monotonic() - t0
        t0 = time.monotonic()
        cursor.execute(f"DROP TABLE {target}")
        drop = time.monotonic() - t0
        figure(
            f"DETACH / DROP of {target} ({n:,} events)",
            f"{detach * 1000:.0f} ms / {drop * 1000:.0f} ms",
        )

    # 3. the current purge, on runs_event at this size
    for wf in WORKFLOWS:
        RetentionPolicy.objects.update_or_create(
            name=wf.name,
            defaults={
                "workflow": wf.name,
                "enabled": wf.event_days is not None,
                "payload_days": wf.payload_days,
                "event_days": wf.event_days or wf.dedup_days,
                "dedup_days": wf.dedup_days,
            },
        )
    policy = RetentionPolicy.objects.get(name=WORKFLOWS[0].name)
    print(f"purge (event stage) of policy {policy.name} for {args.purge_seconds:.0f}s", flush=True)
    deleted, purged_runs, batches, seconds, longest = purge_events(
        policy, batch, args.purge_seconds
    )
    figure(
        f"current purge on runs_event, event stage (batch {batch})",
        f"{deleted:,} events of {purged_runs:,} runs in {seconds:.1f} s, {batches} "
        f"transactions: {deleted / seconds:,.0f} events/s (longest batch {longest:.2f} s)",
    )
    if deleted:
        figure(
            f"the same purge of {n:,} events (one partition) at that rate",
            f"{n / (deleted / seconds):,.1f} s, against DROP {drop * 1000:.0f} ms",
        )

    print("\n| measure | figure |\n|---|---|")
    for measure, value in FIGURES:
        print(f"| {measure} | {value} |")


if __name__ == "__main__":
    main()
