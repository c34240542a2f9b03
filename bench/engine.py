"""Engine benchmark: one table and one JSON line, all measured in one run.
Figures, never assertions.

    make bench                                   # embedded servers in var/bench/
    DATABASE_URL=… CELERY_BROKER_URL=… .venv/bin/python bench/engine.py [--quick]

- ceiling: raw psycopg transactions/s that insert a claim and complete it (2 connections);
- map floor: raw psycopg transactions/s that insert a map item's own rows (its claim and
  the example's target record) on the real tables, against a running batch attempt;
- plain Celery: no-op tasks/s, same settings, same broker, prefork -c 2 (bench/noop.py);
- durable-runs (one `celery worker -c 2`): migrate-records items/s (5,000 items);
  steps/s of 200 runs of a 10-step chain of pure, then idempotent, then guarded steps
  (the pure one also with -c 4, the peer's concurrency);
  a 1 → 20 → 1 fan-out/fan-in; the latency from a step's start to its successor's start;
- through PgBouncer (Debian's, transaction mode, bench/pooler.py): the pure chain and the
  map again with the workers' DATABASE_URL naming the pooler (`?pooler=pgbouncer`: no
  prepared statements), beside the direct figures (skipped when pgbouncer is missing);
- peer: DBOS Transact, the same 10-step chain x 200 workflows, 4 threads, same server;
- tracing (docs/operating.md#tracing): the pure chain with the workers exporting OTLP/HTTP
  to a receiver in this process, interleaved with the same chain untraced: steps/s and
  the workers' CPU per step, on and off, and the spans exported per step;
- database work per step / per map item, from pg_stat_database deltas (and
  pg_stat_statements when the server loads it), plus each step's transactions as the
  engine issues them, counted in-process.

Throughput is timed on the database's clock, from the first attempt's start to the last
run's finish: messages are queued before the workers start, so neither submission nor
worker start-up is in the figure (DBOS's figure includes starting its workflows).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import common  # bench/, the directory of this script; sets Django up
import pooler
import redis
from ceiling import FLOOR_PREFIX, ceiling, map_floor
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.db.models import Max, Min

from examples.models import TargetRecord
from runs import engine
from runs.engine import tools
from runs.models import Claim, Run, Step
from runs.states import RUN_FINISHED, RunStatus


@dataclass
class Phase:
    name: str
    units: int  # steps or items
    elapsed: float
    db: dict[str, float]
    # CPU seconds per process group (workers, postgres, redis) over the measured span
    # only (first start to last finish): the workers' start-up is not a step's cost.
    cpu: dict[str, float] | None = None

    @property
    def rate(self) -> float:
        return self.units / self.elapsed

    def per_unit(self, key: str) -> float:
        return self.db.get(key, float("nan")) / self.units


def _bounds(run_ids: list[uuid.UUID], batches_only: bool = False) -> tuple[float, float]:
    """Epoch seconds, on the database's clock, of the first step's start and the last
    finish."""
    steps = Step.objects.filter(run_id__in=run_ids)
    if batches_only:
        steps = steps.filter(parent__isnull=False)
    agg = steps.aggregate(first=Min("started_at"), last=Max("finished_at"))
    return agg["first"].timestamp(), agg["last"].timestamp()


def _span(run_ids: list[uuid.UUID], batches_only: bool = False) -> float:
    """Seconds on the database's clock from the first step's start to the last finish."""
    first, last = _bounds(run_ids, batches_only)
    return last - first


def _finished(counters: common.DbCounters, run_ids: list[uuid.UUID]) -> bool:
    rows = counters.poll(
        "SELECT count(*) FROM runs_run WHERE id = ANY(%s) AND NOT (status = ANY(%s))",
        [run_ids, list(RUN_FINISHED)],
    )
    return int(rows[0][0]) == 0


def drive(
    name: str,
    run_ids: list[uuid.UUID],
    workers: common.Workers,
    sources: dict[str, Any],
    timeout: float,
) -> tuple[dict[str, float], common.CpuMeter]:
    """Start `workers` (the runs' messages wait in the queue), sample the CPU of
    `sources` (name -> callable returning pids) until every run has finished, stop
    them; the database's counters over that stretch, and the meter. Exits when a run
    did not succeed."""
    common.close_django()
    counters = common.DbCounters()
    before = counters.snapshot()
    own = counters.own
    workers.start()
    # The bench's own polling backend is not the engine's cost.
    polling = counters.conn.info.backend_pid
    measured = {
        name: (lambda pids=pids: [p for p in pids() if p != polling])
        if name == "postgres"
        else pids
        for name, pids in sources.items()
    }
    meter = common.CpuMeter(measured)
    try:

        def done() -> bool:
            meter.sample()
            return _finished(counters, run_ids)

        # Sampled every 0.1 s: the CPU over the measured span is read between two
        # samples, so the period is its error at either end.
        common.wait_until(done, timeout, every=0.1)
        meter.sample()
    finally:
        workers.stop()
    after = counters.snapshot()
    db = counters.delta(before, after, own)
    counters.close()
    failed = Run.objects.filter(pk__in=run_ids).exclude(status=RunStatus.SUCCEEDED).count()
    if failed:
        raise SystemExit(f"{name}: {failed} of {len(run_ids)} runs did not succeed")
    return db, meter


def floor_of_map(seconds: float) -> float:
    """bench/ceiling.py's map_floor, against a batch attempt of its own: a one-record
    migrate-records run whose batch is started for it, then, the floor's rows removed,
    run to its end, so that no later phase meets a running attempt or its expiry."""
    run = engine.submit_run(workflow="migrate-records", input={"count": 1, "batch_size": 1})
    engine.execute_step(step_id=Step.objects.get(run=run, key="list_records").id, worker="floor")
    batch = Step.objects.get(run=run, key="migrate[0]")
    started = tools.start_attempt(step_id=batch.id, worker="floor")
    assert started is not None
    try:
        return map_floor(
            common.dsn(),
            run_id=run.id,
            step_id=batch.id,
            attempt_id=started.attempt.id,
            seconds=seconds,
        )
    finally:
        Claim.objects.filter(step_id=batch.id, key__startswith=FLOOR_PREFIX).delete()
        TargetRecord.objects.filter(run_id=run.id).delete()
        tools.run_attempt(started)
        common.close_django()


def chains(workflow: str, runs: int) -> Callable[[], list[Run]]:
    """What submits `runs` runs of a chain workflow (input n = 0, 1, ...), for measure()."""
    return lambda: [engine.submit_run(workflow=workflow, input={"n": i}) for i in range(runs)]


def migration(items: int) -> Callable[[], list[Run]]:
    """What submits one migrate-records run of `items` records in batches of 100."""
    return lambda: [
        engine.submit_run(workflow="migrate-records", input={"count": items, "batch_size": 100})
    ]


def measure(
    name: str,
    submit: Any,
    units: int,
    *,
    groups: tuple[int, ...] = (2,),
    batches_only: bool = False,
    timeout: float = 900,
    cpu: dict[str, float] | None = None,
) -> Phase:
    """Submit (workers stopped: the messages wait in the queue), start the workers,
    wait for every run to finish, stop them; time and count on the database."""
    run_ids = [r.id for r in submit()]
    workers = common.Workers(groups=groups)
    sources = {
        "workers": workers.pids,
        "postgres": lambda: common.postgres_backends(settings.DATABASES["default"]["NAME"]),
        "redis": common.redis_pids,
    }
    db, meter = drive(name, run_ids, workers, sources, timeout)
    if cpu is not None:
        cpu.update(meter.seconds())
    first, last = _bounds(run_ids, batches_only)
    return Phase(name, units, last - first, db, meter.between(first, last))


@contextlib.contextmanager
def workers_environment(**variables: str) -> Any:
    """Variables the workers started meanwhile inherit (common.Workers copies
    os.environ); this process's own settings are loaded already and keep theirs."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def through_pgbouncer(runs: int, items: int) -> dict[str, Phase] | None:
    """The pure chain and the map with the workers behind a PgBouncer in transaction
    mode; None when pgbouncer is not installed."""
    if pooler.available() is None:
        return None
    db = settings.DATABASES["default"]
    server = {
        "host": db.get("HOST") or "127.0.0.1",
        "port": str(db.get("PORT") or 5432),
        "user": db.get("USER") or "postgres",
        "password": db.get("PASSWORD") or "",
        "dbname": db["NAME"],
    }
    # A server connection for each of the two pool processes and their parent: the
    # figure is the hop and the unprepared statements, not a wait for a connection.
    with (
        pooler.PgBouncer(common.ROOT / "var" / "bench-pgbouncer", server, pool_size=3) as bouncer,
        workers_environment(DATABASE_URL=bouncer.url(), DATABASE_POOLER="pgbouncer"),
    ):
        chain = measure("pure via pgbouncer", chains("bench-chain-pure", runs), runs * 10)
        mapped = measure("map via pgbouncer", migration(items), items, batches_only=True)
    return {"pure": chain, "map": mapped}


def tracing_cost(runs: int, rounds: int) -> dict[str, float]:
    """The pure chain untraced and traced, interleaved `rounds` times (off, on, off,
    on…: the machine's drift falls on both): steps/s and the workers' CPU seconds per
    step, best round of each; the spans the receiver got per traced step."""
    from tests.support.otlp import otlp_receiver

    chain = chains("bench-chain-pure", runs)
    figures: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    postgres: dict[str, list[float]] = {"off": [], "on": []}
    spans = 0
    with otlp_receiver() as receiver:
        for _ in range(rounds):
            for mode in ("off", "on"):
                variables = (
                    {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SDK_DISABLED": "false"}
                    if mode == "on"
                    else {"OTEL_SDK_DISABLED": "true"}
                )
                with workers_environment(**variables):
                    phase = measure(f"pure, tracing {mode}", chain, runs * 10)
                # Over the measured span, as the cost table: not the workers' start-up.
                cpu: dict[str, float] = phase.cpu or {}
                figures[mode].append((phase.rate, cpu.get("workers", 0.0) / phase.units))
                postgres[mode].append(cpu.get("postgres", 0.0) / phase.units)
        # The last batches leave the workers as they stop (worker_process_shutdown).
        spans = len(receiver.received())
    best = {mode: max(rows) for mode, rows in figures.items()}
    cpu_off = min(c for _, c in figures["off"])
    cpu_on = min(c for _, c in figures["on"])
    return {
        "off_steps_per_s": best["off"][0],
        "on_steps_per_s": best["on"][0],
        "off_cpu_ms_per_step": cpu_off * 1000,
        "on_cpu_ms_per_step": cpu_on * 1000,
        "off_pg_cpu_ms_per_step": min(postgres["off"]) * 1000,
        "on_pg_cpu_ms_per_step": min(postgres["on"]) * 1000,
        "spans_per_step": spans / (runs * 10 * rounds),
    }


REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
# What the peer's row says when it was not measured (--skip-peer, or it failed).
NO_PEER = {
    key: float("nan")
    for key in (
        "steps_per_s",
        "xact_per_step",
        "rows_written_per_step",
        "wal_records_per_step",
        "wal_bytes_per_step",
        "worker_cpu_ms_per_step",
        "postgres_cpu_ms_per_step",
    )
}


def unit_cost(phase: Phase) -> dict[str, float]:
    """What one step (or map item) of `phase` cost: CPU ms of the workers and of the
    PostgreSQL backends over the measured span (from /proc), rows written, WAL records
    and bytes, commits; and units per CPU-second."""
    cpu = phase.cpu or {}
    workers = cpu.get("workers", float("nan")) * 1000 / phase.units
    postgres = cpu.get("postgres", float("nan")) * 1000 / phase.units
    return {
        "worker_cpu_ms": workers,
        "postgres_cpu_ms": postgres,
        "cpu_ms": workers + postgres,
        "per_cpu_s": 1000 / (workers + postgres) if workers + postgres else float("nan"),
        "broker_cpu_ms": cpu.get("redis", float("nan")) * 1000 / phase.units,
        "rows": (phase.db["tup_inserted"] + phase.db["tup_updated"]) / phase.units,
        "wal_records": phase.per_unit("wal_records"),
        "wal_bytes": phase.per_unit("wal_bytes"),
        "commits": phase.per_unit("xact_commit"),
    }


def peer_cost(peer: dict[str, float]) -> dict[str, float]:
    workers, postgres = peer["worker_cpu_ms_per_step"], peer["postgres_cpu_ms_per_step"]
    return {
        "worker_cpu_ms": workers,
        "postgres_cpu_ms": postgres,
        "cpu_ms": workers + postgres,
        "per_cpu_s": 1000 / (workers + postgres) if workers + postgres else float("nan"),
        "broker_cpu_ms": 0.0,  # DBOS has no broker: its queue is its tables
        "rows": peer["rows_written_per_step"],
        "wal_records": peer["wal_records_per_step"],
        "wal_bytes": peer["wal_bytes_per_step"],
        "commits": peer["xact_per_step"],
    }


COST_ROWS = (
    ("CPU ms, worker processes", "worker_cpu_ms", "{:.2f}"),
    ("CPU ms, PostgreSQL backends", "postgres_cpu_ms", "{:.2f}"),
    ("CPU ms, both", "cpu_ms", "{:.2f}"),
    ("per CPU-second (both)", "per_cpu_s", "{:,.0f}"),
    ("CPU ms, the broker (Redis; DBOS has none)", "broker_cpu_ms", "{:.2f}"),
    ("rows written", "rows", "{:.1f}"),
    ("WAL records", "wal_records", "{:.1f}"),
    ("WAL bytes", "wal_bytes", "{:,.0f}"),
    ("commits", "commits", "{:.2f}"),
)


def print_costs(costs: dict[str, dict[str, float]], heads: dict[str, str]) -> None:
    """The cost table docs/performance.md leads with: one column per measured shape."""
    width = max(len(label) for label, _, _ in COST_ROWS)
    print()
    print(f"| per unit {' ' * (width - 9)} | " + " | ".join(heads[k] for k in costs) + " |")
    print(f"|{'-' * (width + 2)}|" + "|".join("-" * (len(heads[k]) + 2) for k in costs) + "|")
    for label, key, shape in COST_ROWS:
        cells = [shape.format(costs[k][key]).rjust(len(heads[k])) for k in costs]
        print(f"| {label:<{width}} | " + " | ".join(cells) + " |")


def lead_costs(
    pure: Phase, mapped: Phase, peer: dict[str, float], args: argparse.Namespace
) -> dict[str, dict[str, float]]:
    """The cost table's figures for the pure chain, the map and DBOS's chain, printed
    (print_costs) and returned for the JSON line (cost_figures)."""
    costs = {"pure": unit_cost(pure), "map": unit_cost(mapped), "dbos": peer_cost(peer)}
    print_costs(
        costs,
        {
            "pure": f"10-step chain, pure, x{args.runs} (per step)",
            "map": f"migrate-records, {args.items} items (per item)",
            "dbos": f"DBOS 10-step chain, x{args.runs} (per step)",
        },
    )
    return costs


def cost_figures(costs: dict[str, dict[str, float]]) -> dict[str, float]:
    """The cost table as the JSON line's `cost_<shape>_<figure>` keys."""
    return {
        f"cost_{shape}_{key}": round(value, 3)
        for shape, figures in costs.items()
        for key, value in figures.items()
    }


def plain_celery(n: int) -> float:
    """No-op tasks per second through the same settings and broker."""
    import noop

    queue = f"{common.QUEUE}-noop"
    counter = f"bench-noop-{uuid.uuid4().hex[:8]}"
    r = redis.Redis.from_url(common.redis_url(settings.CELERY_BROKER_URL))
    for _ in range(n):
        noop.noop.apply_async((counter,), queue=queue, routing_key=queue)
    with common.Workers(groups=(2,), app="bench.noop", queues=queue):
        common.wait_until(lambda: int(r.get(counter) or 0) >= n, 300, every=0.1)
    first, last = float(r.get(f"{counter}:first") or 0), float(r.get(f"{counter}:last") or 0)
    r.delete(counter, f"{counter}:first", f"{counter}:last")
    return n / (last - first)


def latency(runs: int) -> tuple[float, float]:
    """Median and p99 (ms) from a step's start to its successor's start, on the
    database's clock, with idle workers (one run at a time: no queue in front): a whole
    step of the chain, its function, finish and hand-over. (From its finish to the
    successor's start, as this row once measured, reads 0: a pure successor starts in its
    predecessor's finish statement, at the same statement_timestamp().)"""
    gaps: list[float] = []
    with common.Workers(groups=(2,)):
        time.sleep(3)  # started and connected
        for i in range(runs):
            run = engine.submit_run(workflow="bench-chain-pure", input={"n": i})
            common.wait_until(
                lambda run=run: Run.objects.filter(pk=run.id, status__in=RUN_FINISHED).exists(),
                120,
                every=0.02,
            )
            steps = {s.name: s for s in Step.objects.filter(run=run)}
            for k in range(1, 10):
                prev, nxt = steps[f"s{k - 1}"], steps[f"s{k}"]
                gaps.append((nxt.started_at - prev.started_at).total_seconds() * 1000)
    gaps.sort()
    return statistics.median(gaps), gaps[min(len(gaps) - 1, int(len(gaps) * 0.99))]


def dbos_peer(runs: int) -> dict[str, float]:
    name = f"{settings.DATABASES['default']['NAME']}_dbos"
    common.ensure_database(name)
    out = subprocess.run(
        [
            sys.executable,
            str(common.ROOT / "bench" / "peer_dbos.py"),
            *("--url", common.url(name), "--runs", str(runs), "--threads", "4"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        print(out.stderr[-2000:], file=sys.stderr)
        return dict(NO_PEER)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# --- transactions as the engine issues them --------------------------------------------
class TxRecorder:
    """Groups the statements this process sends into transactions: a statement outside
    an atomic block is a transaction of its own (autocommit); an atomic block's
    statements are one. A transaction is read-only when it only SELECTs (no FOR UPDATE)."""

    def __init__(self) -> None:
        self.transactions: list[list[str]] = []
        self._open: list[str] | None = None

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        text = " ".join(sql.split()).upper()
        if connection.in_atomic_block:
            if self._open is None:
                self._open = []
                self.transactions.append(self._open)
            self._open.append(text)
        else:
            self.transactions.append([text])
        return execute(sql, params, many, context)

    def end_atomic(self) -> None:
        self._open = None

    @staticmethod
    def is_write(tx: list[str]) -> bool:
        return any(not s.startswith("SELECT") or "FOR UPDATE" in s for s in tx)

    def summary(self) -> str:
        marks = [f"{'W' if self.is_write(tx) else 'R'}{len(tx)}" for tx in self.transactions]
        runs: list[list[Any]] = []  # run-length: "W4 x100"
        for mark in marks:
            if runs and runs[-1][0] == mark:
                runs[-1][1] += 1
            else:
                runs.append([mark, 1])
        shape = " ".join(m if n == 1 else f"{m} x{n}" for m, n in runs)
        writes = sum(1 for tx in self.transactions if self.is_write(tx))
        reads = len(self.transactions) - writes
        statements = sum(len(tx) for tx in self.transactions)
        return f"{writes} write + {reads} read-only transactions, {statements} statements [{shape}]"


def record(fn: Any) -> TxRecorder:
    rec = TxRecorder()
    real_commit = connection.commit

    def commit() -> None:
        rec.end_atomic()
        real_commit()

    connection.commit = commit  # type: ignore[method-assign]
    try:
        with connection.execute_wrapper(rec):
            fn()
    finally:
        del connection.commit
    return rec


def in_process_costs() -> dict[str, str]:
    """Of each chain kind: one middle step on its own (a message's start, then its
    finish), and the last five steps as a worker runs them from one message (each next
    step started in its predecessor's finish); and one map batch; run in this process."""
    out: dict[str, str] = {}
    for wf in ("bench-chain-pure", "bench-chain-idempotent", "bench-chain-guarded"):
        run = engine.submit_run(workflow=wf, input={"n": 0})
        for k in range(5):
            step = Step.objects.get(run=run, name=f"s{k}")
            if k < 4:
                engine.execute_step(step_id=step.id, worker="bench")
        out[f"{wf}, one step"] = record(
            lambda step=step: engine.execute_step(step_id=step.id, worker="bench")
        ).summary()
        nxt = Step.objects.get(run=run, name="s5")
        out[f"{wf}, s5-s9 (5 steps) from one message"] = record(
            lambda nxt=nxt: engine.execute_step(step_id=nxt.id, worker="bench", successors=20)
        ).summary()
    run = engine.submit_run(workflow="migrate-records", input={"count": 100, "batch_size": 100})
    engine.execute_step(step_id=Step.objects.get(run=run, key="list_records").id, worker="bench")
    batch = Step.objects.get(run=run, key="migrate[0]")
    out["map batch (100 items)"] = record(
        lambda: engine.execute_step(step_id=batch.id, worker="bench")
    ).summary()
    # The runs ran to their end here; the messages their steps published (s5's, after
    # s4 alone) must not reach the measured phases' workers.
    from config.celery import app

    app.control.purge()
    return out


def tracing_rows(traced: dict[str, float], runs: int) -> list[tuple[str, str]]:
    on, off = traced["on_steps_per_s"], traced["off_steps_per_s"]
    return [
        (
            f"10-step chain, pure, x{runs}, tracing off / on (OTLP/HTTP, every span kept)",
            f"{off:,.0f} / {on:,.0f} steps/s ({on / off:.2f} of off)",
        ),
        (
            "CPU per step, tracing off / on: workers; PostgreSQL",
            f"{traced['off_cpu_ms_per_step']:.2f} / {traced['on_cpu_ms_per_step']:.2f} ms; "
            f"{traced['off_pg_cpu_ms_per_step']:.2f} / {traced['on_pg_cpu_ms_per_step']:.2f} ms",
        ),
        ("spans exported per traced step", f"{traced['spans_per_step']:.1f}"),
    ]


def print_tracing(traced: dict[str, float], runs: int) -> None:
    rows = tracing_rows(traced, runs)
    width = max(len(k) for k, _ in rows)
    print(f"| {'measure':<{width}} | value |")
    print(f"|{'-' * (width + 2)}|-------|")
    for k, v in rows:
        print(f"| {k:<{width}} | {v} |")
    print(json.dumps({"bench": "tracing", **{k: round(v, 3) for k, v in traced.items()}}))


def costs_only(args: argparse.Namespace) -> None:
    """The cost table alone, with the ceiling and the rates it is judged against: the
    map, the pure chain, DBOS's chain (unless --skip-peer), one JSON line."""
    ceil = ceiling(common.dsn(), connections=2, seconds=args.ceiling_seconds)
    floor = floor_of_map(args.ceiling_seconds)
    mapped = measure("map", migration(args.items), args.items, batches_only=True)
    pure = measure("pure", chains("bench-chain-pure", args.runs), args.runs * 10)
    peer = dict(NO_PEER) if args.skip_peer else dbos_peer(args.runs)
    costs = lead_costs(pure, mapped, peer, args)
    print(
        f"\nceiling {ceil:,.0f} tx/s; map floor {floor:,.0f}/s ({floor / ceil:.2f} of it); "
        f"map {mapped.rate:,.0f} items/s ({mapped.rate / ceil:.2f} of the ceiling, "
        f"{mapped.rate / floor:.2f} of the floor); chain {pure.rate:,.0f} steps/s, "
        f"DBOS {peer['steps_per_s']:,.0f} ({pure.rate / peer['steps_per_s']:.2f}x)"
    )
    print(
        json.dumps(
            {
                "bench": "costs",
                "ceiling_tx_per_s": round(ceil, 1),
                "map_floor_per_s": round(floor, 1),
                "map_items_per_s": round(mapped.rate, 1),
                "chain_pure_steps_per_s": round(pure.rate, 1),
                "dbos_steps_per_s": round(peer["steps_per_s"], 1),
                **cost_figures(costs),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200, help="runs per chain phase")
    parser.add_argument("--items", type=int, default=5000, help="migrate-records items")
    parser.add_argument("--fan-runs", type=int, default=50)
    parser.add_argument("--quick", action="store_true", help="a fifth of everything")
    parser.add_argument("--skip-peer", action="store_true")
    parser.add_argument(
        "--ceiling-seconds", type=float, default=5.0, help="how long the ceiling is measured"
    )
    parser.add_argument(
        "--celery-tasks", type=int, help="plain Celery no-op tasks (default 2,000; --quick 500)"
    )
    parser.add_argument(
        "--latency-runs", type=int, help="runs timed one at a time (default 10; --quick 4)"
    )
    parser.add_argument(
        "--tracing-rounds", type=int, default=2, help="interleaved off/on rounds of tracing"
    )
    parser.add_argument(
        "--tracing-only", action="store_true", help="only the tracing rows (on and off)"
    )
    parser.add_argument(
        "--costs-only",
        action="store_true",
        help="only the cost table: the map, the pure chain and DBOS (for A/B runs: bench/ab.py)",
    )
    args = parser.parse_args()
    if args.quick:
        args.runs, args.items, args.fan_runs = args.runs // 5, args.items // 5, args.fan_runs // 5
    if args.celery_tasks is None:
        args.celery_tasks = 500 if args.quick else 2000
    if args.latency_runs is None:
        args.latency_runs = 4 if args.quick else 10
    if not common.redis_url(settings.CELERY_BROKER_URL).startswith(REDIS_SCHEMES):
        # The plain-Celery row counts its no-op tasks in the broker's Redis.
        raise SystemExit(
            f"bench/engine.py needs a Redis broker, not {settings.CELERY_BROKER_URL.split(':')[0]}:"
            " unset CELERY_BROKER_URL (make bench starts its own) or name a redis:// one"
        )
    call_command("migrate", verbosity=0)
    dbname = settings.DATABASES["default"]["NAME"]
    print(
        f"PostgreSQL {connection.pg_version} ({dbname}), broker {settings.CELERY_BROKER_URL}, "
        f"{platform.machine()} {platform.processor() or ''} x{__import__('os').cpu_count()}, "
        f"Python {platform.python_version()}"
    )
    if args.tracing_only:
        print_tracing(tracing_cost(args.runs, args.tracing_rounds), args.runs)
        return
    if args.costs_only:
        costs_only(args)
        return
    in_process = in_process_costs()

    ceil = ceiling(common.dsn(), connections=2, seconds=args.ceiling_seconds)
    floor = floor_of_map(args.ceiling_seconds)
    celery_rate = plain_celery(args.celery_tasks)

    cpu: dict[str, float] = {}
    phases: dict[str, Phase] = {}
    phases["map"] = measure("map", migration(args.items), args.items, batches_only=True)
    for kind in ("pure", "idempotent", "guarded"):
        phases[kind] = measure(
            kind,
            chains(f"bench-chain-{kind}", args.runs),
            args.runs * 10,
            cpu=cpu if kind == "pure" else None,
        )
    # The same chain, each step under a limit that never binds: what a slot costs.
    phases["limited"] = measure("limited", chains("bench-chain-limited", args.runs), args.runs * 10)
    # The same chain with as many worker processes as DBOS gets threads.
    phases["pure4"] = measure(
        "pure4", chains("bench-chain-pure", args.runs), args.runs * 10, groups=(4,)
    )
    phases["fan"] = measure("fan", chains("bench-fan", args.fan_runs), args.fan_runs * 22)
    pooled = through_pgbouncer(args.runs, args.items)
    traced = tracing_cost(args.runs, args.tracing_rounds)
    lat_median, lat_p99 = latency(args.latency_runs)
    peer = dict(NO_PEER) if args.skip_peer else dbos_peer(args.runs)

    pure, mapped = phases["pure"], phases["map"]
    costs = lead_costs(pure, mapped, peer, args)
    rows: list[tuple[str, str]] = [
        ("ceiling: claim insert+complete, raw psycopg, 2 conns", f"{ceil:,.0f} tx/s"),
        (
            "map floor: an item's claim + target record, raw psycopg, 2 conns",
            f"{floor:,.0f} items/s ({floor / ceil:.2f} of the ceiling)",
        ),
        ("plain Celery no-op tasks (prefork -c 2, acks_late)", f"{celery_rate:,.0f} tasks/s"),
        (f"migrate-records, {args.items} items, batches of 100", f"{mapped.rate:,.0f} items/s"),
        (f"10-step chain, pure, x{args.runs}", f"{pure.rate:,.0f} steps/s"),
        (
            f"10-step chain, pure, x{args.runs}, -c 4 (DBOS's concurrency)",
            f"{phases['pure4'].rate:,.0f} steps/s",
        ),
        (
            f"10-step chain, pure, x{args.runs}, each step under a limit (never full)",
            f"{phases['limited'].rate:,.0f} steps/s ({phases['limited'].rate / pure.rate:.2f} "
            "of no limit)",
        ),
        (f"10-step chain, idempotent, x{args.runs}", f"{phases['idempotent'].rate:,.0f} steps/s"),
        (f"10-step chain, guarded, x{args.runs}", f"{phases['guarded'].rate:,.0f} steps/s"),
        (f"fan-out/fan-in 1->20->1, x{args.fan_runs}", f"{phases['fan'].rate:,.0f} steps/s"),
        ("start -> successor start, median / p99", f"{lat_median:.1f} / {lat_p99:.1f} ms"),
        (
            f"DBOS Transact 10-step chain x{args.runs}, 4 threads",
            f"{peer['steps_per_s']:,.0f} steps/s",
        ),
    ]
    if pooled is None:
        rows.append(("through PgBouncer (transaction mode)", "not measured: pgbouncer missing"))
    else:
        chain_rate, map_rate = pooled["pure"].rate, pooled["map"].rate
        rows += [
            (
                f"10-step chain, pure, x{args.runs}, through PgBouncer (transaction mode)",
                f"{chain_rate:,.0f} steps/s ({chain_rate / pure.rate:.2f} of direct)",
            ),
            (
                f"migrate-records, {args.items} items, through PgBouncer",
                f"{map_rate:,.0f} items/s ({map_rate / mapped.rate:.2f} of direct)",
            ),
        ]
    rows += tracing_rows(traced, args.runs)
    rows += [
        ("map items / ceiling", f"{mapped.rate / ceil:.2f}"),
        ("map items / map floor", f"{mapped.rate / floor:.2f}"),
        ("10-step / ceiling", f"{pure.rate / ceil:.2f}"),
        ("10-step / plain Celery", f"{pure.rate / celery_rate:.2f}"),
        ("10-step / DBOS", f"{pure.rate / peer['steps_per_s']:.2f}"),
        ("10-step -c 4 / DBOS 4 threads", f"{phases['pure4'].rate / peer['steps_per_s']:.2f}"),
    ]
    for key, phase in (("pure", pure), ("idempotent", phases["idempotent"]), ("map", mapped)):
        unit = "item" if key == "map" else "step"
        rows.append(
            (
                f"DB per {unit} ({key}): commits / rows written / WAL records / flushes*",
                f"{phase.per_unit('xact_commit'):.2f} / "
                f"{(phase.db['tup_inserted'] + phase.db['tup_updated']) / phase.units:.2f} / "
                f"{phase.per_unit('wal_records'):.1f} / {phase.per_unit('wal_sync'):.2f}",
            )
        )
    rows.append(("DBOS per step: commits", f"{peer['xact_per_step']:.2f}"))
    rows.append(
        (
            "CPU seconds during the pure chain: workers / postgres / redis",
            " / ".join(f"{cpu.get(k, 0):.1f}" for k in ("workers", "postgres", "redis"))
            + f" (of {pure.elapsed * 2:.1f} available)",
        )
    )
    width = max(len(k) for k, _ in rows)
    print()
    print(f"| {'measure':<{width}} | value |")
    print(f"|{'-' * (width + 2)}|-------|")
    for k, v in rows:
        print(f"| {k:<{width}} | {v} |")
    print()
    statements = common.DbCounters().statements_extension
    print(
        "* commits: pg_stat_database.xact_commit of the bench database (read-only "
        "transactions included, the bench's own reads subtracted); WAL records and flushes "
        "(wal_sync): pg_stat_wal, cluster-wide (other databases' work shows too). "
        "pg_stat_statements is "
        + (
            "loaded."
            if statements
            else "NOT loaded on this server: statement counts below are in-process."
        )
    )
    for name, summary in in_process.items():
        print(f"  {name}: {summary}")
    print(
        json.dumps(
            {
                "bench": "engine",
                "ceiling_tx_per_s": round(ceil, 1),
                "celery_noop_per_s": round(celery_rate, 1),
                "map_items_per_s": round(mapped.rate, 1),
                "chain_pure_steps_per_s": round(pure.rate, 1),
                "chain_idempotent_steps_per_s": round(phases["idempotent"].rate, 1),
                "chain_guarded_steps_per_s": round(phases["guarded"].rate, 1),
                "fan_steps_per_s": round(phases["fan"].rate, 1),
                "latency_ms_median": round(lat_median, 2),
                "latency_ms_p99": round(lat_p99, 2),
                "dbos_steps_per_s": round(peer["steps_per_s"], 1),
                "map_floor_per_s": round(floor, 1),
                "map_over_ceiling": round(mapped.rate / ceil, 3),
                "map_over_floor": round(mapped.rate / floor, 3),
                "chain_over_ceiling": round(pure.rate / ceil, 3),
                "pgbouncer_chain_pure_steps_per_s": (
                    None if pooled is None else round(pooled["pure"].rate, 1)
                ),
                "pgbouncer_map_items_per_s": None
                if pooled is None
                else round(pooled["map"].rate, 1),
                "chain_over_celery": round(pure.rate / celery_rate, 3),
                "chain_over_dbos": round(pure.rate / peer["steps_per_s"], 3),
                "chain_c4_steps_per_s": round(phases["pure4"].rate, 1),
                "chain_c4_over_dbos": round(phases["pure4"].rate / peer["steps_per_s"], 3),
                "commits_per_step": round(pure.per_unit("xact_commit"), 2),
                "commits_per_item": round(mapped.per_unit("xact_commit"), 3),
                "wal_flushes_per_step": round(pure.per_unit("wal_sync"), 3),
                "wal_flushes_per_item": round(mapped.per_unit("wal_sync"), 3),
                "dbos_commits_per_step": round(peer["xact_per_step"], 2),
                "in_process": in_process,
                **cost_figures(costs),
                **{f"tracing_{k}": round(v, 3) for k, v in traced.items()},
            }
        )
    )


if __name__ == "__main__":
    main()
