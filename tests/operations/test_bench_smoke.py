"""Smoke runs of the benchmarks (bench/): each script, at a size that takes seconds, as a
real subprocess, on databases of this test session's own on the test server and broker
(bench/chaos.py starts its own, as it must stop them). Each must exit 0 and print its
figures, so a schema change that breaks a seeder or a bench fails here the day it lands.
Figures are not judged, except chaos's: no duplicate and no lost effect."""

from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
import pytest
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
# Each bench names its databases after DATABASE_URL's: <this>, <this>_ui_bench,
# <this>_retention_bench, <this>_scale, <this>_scale_empty, <this>_dbos.
DATABASE = f"{os.environ.get('RUNS_TEST_DATABASE', 'test_durable_runs')}_bench"


def _server() -> dict[str, Any]:
    db = settings.DATABASES["default"]
    return {
        "host": db.get("HOST") or "127.0.0.1",
        "port": db.get("PORT") or 5432,
        "user": db.get("USER") or "postgres",
        "password": db.get("PASSWORD") or None,
    }


def _drop_bench_databases() -> None:
    with psycopg.connect(dbname="postgres", autocommit=True, **_server()) as conn:
        names = conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s",
            [DATABASE.replace("_", r"\_") + "%"],
        ).fetchall()
        for (name,) in names:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def bench_env():
    """The environment of a bench script: this server with the bench's database name,
    this broker, a queue of its own; the databases are dropped at the end."""
    url = os.environ.get("DATABASE_URL") or "postgres://postgres@127.0.0.1:5432/durable_runs"
    url = urlunsplit(urlsplit(url)._replace(path="/" + quote(DATABASE, safe="")))
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "RUNS_QUEUE": f"durable-runs-bench-smoke-{uuid.uuid4().hex[:6]}",
        "PYTHONUNBUFFERED": "1",
    }
    for name in ("RUNS_TEST_DATABASE", "RUNS_FAULTS", "PROMETHEUS_MULTIPROC_DIR"):
        env.pop(name, None)
    _drop_bench_databases()
    with psycopg.connect(dbname="postgres", autocommit=True, **_server()) as conn:
        conn.execute(f'CREATE DATABASE "{DATABASE}"')
    try:
        yield env
    finally:
        _drop_bench_databases()


def run_bench(
    env: dict[str, str], script: str, *args: str, timeout: float = 240
) -> subprocess.CompletedProcess[str]:
    """Run bench/<script> to its end, whatever it exits with."""
    return subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args],
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def bench(env: dict[str, str], script: str, *args: str, timeout: float = 240) -> str:
    """Run bench/<script> to its end; its output (stdout and stderr) when it exits 0."""
    out = run_bench(env, script, *args, timeout=timeout)
    text = out.stdout + out.stderr
    assert out.returncode == 0, f"bench/{script} exited {out.returncode}:\n{text[-6000:]}"
    return out.stdout


def last_json(stdout: str) -> dict[str, Any]:
    """The JSON line a bench prints last (log lines are JSON too: the last one counts)."""
    line = [line for line in stdout.splitlines() if line.startswith("{")][-1]
    result: dict[str, Any] = json.loads(line)
    return result


def figure_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if not line.startswith("{")]


def test_ui_seed_then_pages(bench_env):
    seeded = bench(
        bench_env, "seed_ui.py", "--runs", "200", "--events", "3000", "--big-run-events", "100"
    )
    assert re.search(r"^history check: \d+ clones, one per template", seeded, re.M), seeded
    assert re.search(r"^seeded 200 runs and \d,\d{3} events in", seeded, re.M), seeded
    # A second call leaves a complete seed of the same size alone (make bench-ui).
    again = bench(
        bench_env,
        "seed_ui.py",
        *("--runs", "200", "--events", "3000", "--big-run-events", "100", "--if-needed"),
    )
    assert "is seeded already" in again

    pages = bench(bench_env, "ui.py", "--requests", "2", "--warmup", "0")
    table = figure_lines(pages)
    assert any(re.match(r"page +median ms +p95 ms +queries", line) for line in table), pages
    result = last_json(pages)
    assert result["bench"] == "ui"
    assert result["data"]["runs"] == 200
    assert len(result["pages"]) >= 15
    for name, page in result["pages"].items():
        assert page["queries"] > 0 and page["median_ms"] > 0, name
        assert any(line.startswith(name) for line in table), name

    # The two index designs for search fields, on the same seed (docs/performance.md).
    designs = last_json(bench(bench_env, "search_designs.py", "--lookups", "2", "--submits", "3"))
    assert designs["bench"] == "search_designs" and designs["runs"] == 200
    assert set(designs["designs"]) == {"a", "b1", "b2", "none"}
    for name, figures in designs["designs"].items():
        assert figures["submit_ms"] > 0, name


def test_retention(bench_env):
    out = bench(
        bench_env, "retention.py", "--events", "2000", "--per-run", "100", "--baseline", "1"
    )
    assert re.search(r"^seeded 20 finished runs, 2000 events in", out, re.M), out
    purged = r"^purge of policy \S+ \(batch \d+\): .*; 0 events of finished runs left$"
    assert re.search(purged, out, re.M), out
    assert re.search(r"^  events +[\d.]+s +[\d,]+ rows/s .*'events_deleted': 2000", out, re.M), out
    assert re.search(r"^  payloads +[\d.]+s +[\d,]+ rows/s", out, re.M), out
    assert re.search(r"^writer before the purge: \d+ commits, median", out, re.M), out
    assert re.search(r"^writer during the purge: ", out, re.M), out


def test_partitioning(bench_env):
    out = bench(
        bench_env,
        "partitioning.py",
        "--events",
        "20000",
        "--per-run",
        "100",
        "--purge-seconds",
        "2",
    )
    lines = figure_lines(out)
    assert "| runs_event: rows | 20,000 |" in lines, out
    assert any(
        re.match(r"\| bench_event_part: monthly partitions \| \d+ \(", line) for line in lines
    )
    droppable = r"\| by event month \(the prototype\): partitions droppable whole now \| \d+ of \d+"
    assert any(re.match(droppable, line) for line in lines), out
    assert any(
        re.match(r"\| DETACH / DROP of \S+ .*\| [\d.]+ ms / [\d.]+ ms \|", line) for line in lines
    )
    purge = r"\| current purge on runs_event, event stage .*\| [\d,]+ events of [\d,]+ runs in"
    assert any(re.match(purge, line) for line in lines), out


@pytest.mark.workers
def test_scale_out(bench_env):
    out = bench(
        bench_env,
        "scale_out.py",
        *("--runs", "6", "--fan-runs", "2", "--layouts", "1,queues,fan2"),
        timeout=300,
    )
    rows = {row["layout"]: row for row in last_json(out)["rows"]}
    assert len(rows) == 3, out
    for row in rows.values():
        _finite_positive(row, ["steps_per_s", "commits_per_step"])
    (queued,) = [row for row in rows.values() if "queues" in row]
    # Each group ran its own queue's runs, and nothing was left behind on any queue (the
    # bench counts them on a Redis broker).
    assert queued["runs_crossing_groups"] == 0, queued
    assert all(n == 0 for n in queued["messages_left_after"].values()), queued


def _finite_positive(result: dict[str, Any], keys: list[str]) -> None:
    bad = {k: result[k] for k in keys if not (math.isfinite(result[k]) and result[k] > 0)}
    assert not bad, bad


def test_engine_refuses_a_broker_it_cannot_count_on_in_one_line(bench_env):
    env = {**bench_env, "CELERY_BROKER_URL": "amqp://guest:guest@127.0.0.1:5672/none"}
    out = run_bench(env, "engine.py", "--quick", timeout=60)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines() == [
        "bench/engine.py needs a Redis broker, not amqp: unset CELERY_BROKER_URL"
        " (make bench starts its own) or name a redis:// one"
    ]


@pytest.mark.workers
def test_engine(bench_env):
    if not bench_env["CELERY_BROKER_URL"].startswith(("redis", "unix")):
        pytest.skip("bench/engine.py counts plain Celery in a Redis broker (see the test above)")
    try:
        import dbos  # noqa: F401  (the bench extra)

        peer: list[str] = []
    except ImportError:
        peer = ["--skip-peer"]
    out = bench(
        bench_env,
        "engine.py",
        *("--runs", "4", "--items", "40", "--fan-runs", "1"),
        *("--ceiling-seconds", "0.5", "--celery-tasks", "20", "--latency-runs", "1"),
        *("--tracing-rounds", "1"),
        *peer,
    )
    table = "\n".join(figure_lines(out))
    for row in (
        "CPU ms, worker processes",
        "CPU ms, PostgreSQL backends",
        "WAL bytes",
        "ceiling: claim insert+complete",
        "map floor: an item's claim + target record",
        "10-step chain, guarded, x4",
        "DB per item",
        "10-step chain, pure, x4, tracing off / on",
    ):
        assert f"| {row}" in table, table
    result = last_json(out)
    assert result["bench"] == "engine"
    figures = [
        "ceiling_tx_per_s",
        "map_floor_per_s",
        "celery_noop_per_s",
        "map_items_per_s",
        "chain_pure_steps_per_s",
        "chain_idempotent_steps_per_s",
        "chain_guarded_steps_per_s",
        "chain_c4_steps_per_s",
        "fan_steps_per_s",
        "latency_ms_median",
        "commits_per_step",
        "commits_per_item",
        "tracing_off_steps_per_s",
        "tracing_on_steps_per_s",
    ]
    # Every traced step's attempt span reached the receiver, the last ones as the
    # workers stopped.
    assert result["tracing_spans_per_step"] >= 1.0, result
    # What a step and a map item cost (the table docs/performance.md leads with), each
    # read from /proc and pg_stat_* over the measured span.
    # A smoke run's span is a fraction of a second: its CPU may round to one clock tick
    # or none (10 ms), so only the counts are held positive; the CPU must be a number.
    counts, cpu = ["rows", "wal_records", "wal_bytes"], ["worker_cpu_ms", "postgres_cpu_ms"]
    shapes = ["pure", "map"] if peer else ["pure", "map", "dbos"]
    figures += [f"cost_{shape}_{key}" for shape in shapes for key in counts]
    assert all(result[f"cost_{s}_{k}"] >= 0 for s in shapes for k in cpu), result
    if not peer:  # the peer failing prints NaN: it must not go unnoticed here
        figures += ["dbos_steps_per_s", "dbos_commits_per_step"]
    # The rows through PgBouncer, wherever Debian's pgbouncer is (CI installs it).
    if os.path.exists("/usr/sbin/pgbouncer") or os.environ.get("CI"):
        figures += ["pgbouncer_chain_pure_steps_per_s", "pgbouncer_map_items_per_s"]
        assert "| 10-step chain, pure, x4, through PgBouncer (transaction mode)" in table
    _finite_positive(result, [*figures, "chain_over_ceiling", "map_over_ceiling", "map_over_floor"])
    assert len(result["in_process"]) == 7, result["in_process"]


@pytest.mark.workers
def test_engine_costs_only(bench_env):
    """What bench/ab.py runs for each side: the cost table alone, and its JSON line."""
    if not bench_env["CELERY_BROKER_URL"].startswith(("redis", "unix")):
        pytest.skip("bench/engine.py counts plain Celery in a Redis broker")
    out = bench(
        bench_env,
        "engine.py",
        *("--costs-only", "--skip-peer", "--runs", "4", "--items", "40"),
        *("--ceiling-seconds", "0.5"),
    )
    assert "| CPU ms, worker processes" in "\n".join(figure_lines(out))
    result = last_json(out)
    assert result["bench"] == "costs"
    counts = [f"cost_{shape}_{key}" for shape in ("pure", "map") for key in ("rows", "wal_records")]
    _finite_positive(
        result,
        [
            "ceiling_tx_per_s",
            "map_floor_per_s",
            "map_items_per_s",
            "chain_pure_steps_per_s",
            *counts,
        ],
    )


@pytest.mark.workers
def test_scale(bench_env):
    out = bench(bench_env, "scale.py", "--runs", "3", "--fill", "500", "--refill")
    lines = figure_lines(out)
    assert any(re.match(r"\| near-empty \| \d+ \| [\d,]+ \| [\d.]+ \|", line) for line in lines)
    assert any(re.match(r"\| full \| 500 \| [\d,]+ \| [\d.]+ \|", line) for line in lines), out
    assert any(line.startswith("-- finish (fence, claim") for line in lines), out  # EXPLAIN
    result = last_json(out)
    assert result["bench"] == "scale"
    assert result["full"]["runs_before"] == 500
    _finite_positive(result, ["ratio"])
    _finite_positive(result["empty"], ["steps_per_s", "commits_per_step"])


@pytest.mark.workers
def test_chaos(bench_env):
    """A short soak with faults (a seed whose first two are a killed worker group and a
    stopped one): still no effect duplicated or lost, and every history verifies."""
    out = bench(
        bench_env,
        "chaos.py",
        *("--seed", "1", "--duration", "16", "--settle", "90"),
        *("--migrations", "2", "--records", "40", "--warmup", "1", "--fault-gap", "3", "5"),
    )
    lines = figure_lines(out)
    assert "duplicate effects                     0" in lines, out
    assert "lost effects                          0" in lines, out
    assert any(re.match(r"verify_history +\d+ run\(s\) checked, 0 differ", ln) for ln in lines)
    assert any(line.startswith("recovery median / max (s)") for line in lines), out
    result = last_json(out)
    assert result["duplicate_effects"] == 0 and result["lost_effects"] == 0, result
    assert result["verify_history_clean"] and result["settled"], result
    assert result["runs_total"] > 0 and result["runs_succeeded"] > 0, result
    assert sum(result["faults"].values()) >= 2 and result["never_recovered"] == 0, result
