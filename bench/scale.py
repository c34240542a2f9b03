"""Scale: the 10-step pure chain measured on a near-empty database and on
one holding 1,000,000 finished runs (each with its step, attempt, claim and events),
written by bulk INSERT … SELECT generate_series, not by the engine. Prints both rates,
their ratio, the indexes of the engine's tables and EXPLAIN ANALYZE of the statements
a step runs, on the full database.

    DATABASE_URL=… CELERY_BROKER_URL=… .venv/bin/python bench/scale.py [--runs 200]

Databases: <name>_scale_empty (recreated each time) and <name>_scale (filled once,
kept: --refill to start again).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

HERE = Path(__file__).resolve().parent
FILL = 1_000_000


def _with_db(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path=f"/{name}"))


def _child(url: str, *args: str) -> dict:
    env = dict(os.environ, DATABASE_URL=url)
    out = subprocess.run(
        [sys.executable, str(HERE / "scale.py"), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        sys.stderr.write(out.stdout[-3000:] + out.stderr[-3000:])
        raise SystemExit(f"scale.py {' '.join(args)} failed")
    for line in out.stdout.splitlines():
        if line.startswith("EXPLAIN|") or line.startswith("INDEX|"):
            print(line.split("|", 1)[1])
    return json.loads(out.stdout.strip().splitlines()[-1])


def orchestrate(args: argparse.Namespace) -> None:
    base = os.environ.get("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/durable_runs")
    name = urlsplit(base).path.lstrip("/")
    empty_url, full_url = _with_db(base, f"{name}_scale_empty"), _with_db(base, f"{name}_scale")
    runs = str(args.runs)
    empty = _child(empty_url, "--child-measure", "--recreate", "--runs", runs)
    refill = ["--refill"] if args.refill else []
    fill = _child(full_url, "--child-fill", "--fill", str(args.fill), *refill)
    full = _child(full_url, "--child-measure", "--explain", "--runs", runs)
    ratio = full["steps_per_s"] / empty["steps_per_s"]
    print()
    print("| database | runs in it | 10-step chain steps/s | commits/step |")
    print("|---|---|---|---|")
    for label, r in (("near-empty", empty), ("full", full)):
        print(
            f"| {label} | {r['runs_before']:,} | {r['steps_per_s']:,.0f} | "
            f"{r['commits_per_step']:.2f} |"
        )
    print(f"full / empty: {ratio:.2f} (fill took {fill['fill_seconds']:.0f}s)")
    print(json.dumps({"bench": "scale", "empty": empty, "full": full, "ratio": round(ratio, 3)}))


# --- children: Django on the database DATABASE_URL names ------------------------------
def _recreate(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres", scheme="postgresql"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def _ensure(url: str) -> None:
    import psycopg

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    admin = urlunsplit(parts._replace(path="/postgres", scheme="postgresql"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')


FILL_SQL = [
    # Runs of charge-payment (one idempotent step), finished over the last 30 days.
    """
    INSERT INTO runs_run (id, workflow, version, input, status, plan_revision, last_seq,
                          steps_remaining, result, error, ends_as, submitted_by,
                          submitted_via, created_at, updated_at, finished_at)
    SELECT md5('scale-run-' || g)::uuid, 'charge-payment', 1, jsonb_build_object('amount', g),
           CASE WHEN g %% 50 = 0 THEN 'failed' ELSE 'succeeded' END, 1, 3, 0,
           '{"charge": {"ok": true}}'::jsonb, '', '', 'user:checkout', 'api-token',
           now() - make_interval(secs => g * 2.5), now() - make_interval(secs => g * 2.5 - 1),
           now() - make_interval(secs => g * 2.5 - 1)
    FROM generate_series(1, %(n)s) AS g
    """,
    """
    INSERT INTO runs_step (id, run_id, key, name, kind, status, depends_on, pending_deps,
                           plan_revision, claim_generation, attempts, deferred_attempts,
                           max_attempts, queued_at, result, error, compensates, created_at,
                           started_at, finished_at)
    SELECT %(step0)s + g, md5('scale-run-' || g)::uuid, 'charge', 'charge', 'idempotent',
           'succeeded', '{}', 0, 1, 1, 1, 0, 5, now() - make_interval(secs => g * 2.5),
           '{"ok": true}'::jsonb, '', '', now() - make_interval(secs => g * 2.5),
           now() - make_interval(secs => g * 2.5), now() - make_interval(secs => g * 2.5 - 1)
    FROM generate_series(1, %(n)s) AS g
    """,
    """
    INSERT INTO runs_attempt (id, step_id, run_id, number, status, worker, started_at,
                              lease_expires_at, finished_at, error)
    SELECT %(attempt0)s + g, %(step0)s + g, md5('scale-run-' || g)::uuid, 1, 'succeeded',
           'scale', now() - make_interval(secs => g * 2.5),
           now() - make_interval(secs => g * 2.5 - 60), now() - make_interval(secs => g * 2.5 - 1),
           ''
    FROM generate_series(1, %(n)s) AS g
    """,
    """
    INSERT INTO runs_claim (key, run_id, step_id, item_key, kind, status, attempt_id, result,
                            error, resolved_by, resolution_note, created_at, completed_at)
    SELECT md5('scale-run-' || g) || '/charge/r1/g1', md5('scale-run-' || g)::uuid,
           %(step0)s + g, NULL, 'idempotent', 'succeeded', %(attempt0)s + g,
           '{"ok": true}'::jsonb, '', '', '', now() - make_interval(secs => g * 2.5),
           now() - make_interval(secs => g * 2.5 - 1)
    FROM generate_series(1, %(n)s) AS g
    """,
    """
    INSERT INTO runs_event (run_id, seq, type, step_id, attempt_number, schema_version, payload,
                            created_at)
    SELECT md5('scale-run-' || g)::uuid, e.seq, e.type,
           CASE WHEN e.seq = 2 THEN %(step0)s + g END, CASE WHEN e.seq = 2 THEN 1 END, 1,
           '{}'::jsonb, now() - make_interval(secs => g * 2.5 - e.seq)
    FROM generate_series(1, %(n)s) AS g,
         (VALUES (1, 'run_submitted'), (2, 'step_succeeded'), (3, 'run_succeeded'))
           AS e(seq, type)
    """,
]


def child_fill(refill: bool, fill: int) -> None:
    url = os.environ["DATABASE_URL"]
    if refill:
        _recreate(url)
    else:
        _ensure(url)
    import common  # noqa: F401  (Django on DATABASE_URL)
    from django.core.management import call_command
    from django.db import connection

    from runs.models import Run

    call_command("migrate", verbosity=0)
    t0 = time.monotonic()
    filled = Run.objects.filter(workflow="charge-payment").count()
    if 0 < filled < fill:
        # The fill's ids are numbered from 1: a second fill on top would collide.
        raise SystemExit(f"{url}: {filled:,} runs of {fill:,} filled; --refill starts again")
    if filled == 0:
        with connection.cursor() as cursor:
            cursor.execute("SET synchronous_commit = off")
            cursor.execute("SELECT coalesce(max(id), 0) FROM runs_step")
            step0 = cursor.fetchone()[0]
            cursor.execute("SELECT coalesce(max(id), 0) FROM runs_attempt")
            attempt0 = cursor.fetchone()[0]
            params = {"n": fill, "step0": step0, "attempt0": attempt0}
            for sql in FILL_SQL:
                cursor.execute(sql, params)
            for table in ("runs_step", "runs_attempt"):
                cursor.execute(
                    f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), "
                    f"(SELECT max(id) FROM {table}))"
                )
        with connection.cursor() as cursor:
            cursor.execute("VACUUM ANALYZE")
    print(json.dumps({"fill_seconds": time.monotonic() - t0}))


def child_measure(recreate: bool, explain: bool, runs: int) -> None:
    url = os.environ["DATABASE_URL"]
    if recreate:
        _recreate(url)
    import common  # noqa: F401  (Django on DATABASE_URL)
    from django.core.management import call_command
    from engine import measure

    from runs import engine
    from runs.models import Run

    call_command("migrate", verbosity=0)
    before = Run.objects.count()
    phase = measure(
        "pure",
        lambda: [
            engine.submit_run(workflow="bench-chain-pure", input={"n": i}) for i in range(runs)
        ],
        runs * 10,
    )
    if explain:
        explain_step_statements()
    print(
        json.dumps(
            {
                "runs_before": before,
                "steps_per_s": phase.rate,
                "commits_per_step": phase.per_unit("xact_commit"),
            }
        )
    )


def explain_step_statements() -> None:
    """EXPLAIN ANALYZE of the statements a chain step runs, as the engine runs them:
    prepared, with the generic plan a worker's connection uses (plan_cache_mode =
    force_generic_plan, runs/sql/prepared.py), each in a transaction rolled back afterwards;
    then the indexes of the engine's tables."""
    import re

    from django.db import connection

    from runs import engine
    from runs.engine import tools
    from runs.models import Step
    from runs.record import events

    run = engine.submit_run(workflow="bench-chain-pure", input={"n": 1})
    step = Step.objects.get(run=run, name="s0")
    text = str  # a parameter's type in the PREPARE: text unless named below
    statements = {
        "start (step -> running, attempt, run, dependency results)": (
            tools.HOT_STATEMENTS["start"],
            {
                "step_id": (step.id, "bigint"),
                "running": ("running", text),
                "queued": ("queued", text),
                "retrying": ("retrying", text),
                "active": ("{pending,running,waiting,needs_reconciliation}", "text[]"),
                "compensating": ("{compensating}", "text[]"),
                "running_attempt": ("running", text),
                "worker": ("explain", text),
                "lease": (60.0, "float8"),
                # NULL: tracing off, as measured (runs/ops/tracing.py).
                "span_id": (None, "text"),
            },
        ),
        "finish (fence, claim, step, run counter, dependents)": (
            tools.HOT_STATEMENTS["finish"],
            {
                "attempt": (0, "bigint"),
                "attempt_succeeded": ("succeeded", text),
                "attempt_running": ("running", text),
                "claim": (None, "bigint"),
                "claim_succeeded": ("succeeded", text),
                "in_flight": ("in_flight", text),
                "result": ("1", "jsonb"),
                "succeeded": ("succeeded", text),
                "running": ("running", text),
                "step": (step.id, "bigint"),
                "run": (str(run.id), "uuid"),
                "names": ("{s1}", "text[]"),
                "plain": ("{s1}", "text[]"),
                "pending": ("pending", text),
                "queued": ("queued", text),
                "compensating": ("compensating", text),
                "active": ("{pending,running,waiting,needs_reconciliation}", "text[]"),
            },
        ),
        "events (seq allocation + insert)": (
            events.SQL["append_many"],
            {
                "n": (2, "int"),
                "run": (str(run.id), "uuid"),
                "version": (1, "int"),
                "events": ('[["explain", null, null, {}], ["explain", null, null, {}]]', "jsonb"),
            },
        ),
    }
    for index, (label, (sql, params)) in enumerate(statements.items()):
        names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", sql)))
        body = re.sub(r"%\((\w+)\)s", lambda m, names=names: f"${names.index(m.group(1)) + 1}", sql)
        types = ", ".join("text" if params[n][1] is str else params[n][1] for n in names)
        args = ", ".join(
            "NULL" if params[n][0] is None else "'" + str(params[n][0]) + "'" for n in names
        )
        with connection.cursor() as cursor:
            cursor.execute("BEGIN")
            cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
            cursor.execute(f"PREPARE explained{index} ({types}) AS {body}")
            cursor.execute(
                "EXPLAIN (ANALYZE, COSTS OFF, BUFFERS OFF, TIMING ON) "
                f"EXECUTE explained{index} ({args})"
            )
            plan = [r[0] for r in cursor.fetchall()]
            cursor.execute("ROLLBACK")
        print(f"EXPLAIN|-- {label}")
        for line in plan:
            print(f"EXPLAIN|   {line}")
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT tablename, indexname, pg_size_pretty(pg_relation_size(indexname::regclass)) "
            "FROM pg_indexes WHERE tablename IN ('runs_run', 'runs_step', 'runs_attempt', "
            "'runs_claim', 'runs_event') ORDER BY tablename, indexname"
        )
        for table, index, size in cursor.fetchall():
            print(f"INDEX|   {table}.{index} ({size})")
    # Its queued first step must not be republished into a later measurement.
    engine.cancel_run(run_id=run.id, actor="bench")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--fill", type=int, default=FILL, help="finished runs in the full one")
    parser.add_argument("--refill", action="store_true")
    parser.add_argument("--child-measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--child-fill", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--recreate", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--explain", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child_measure:
        child_measure(args.recreate, args.explain, args.runs)
    elif args.child_fill:
        child_fill(args.refill, args.fill)
    else:
        orchestrate(args)


if __name__ == "__main__":
    main()
