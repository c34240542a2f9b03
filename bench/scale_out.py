"""Scale out: the 10-step pure chain with 1, 2, 4 and 8 worker processes, in one or two
worker groups (separate `celery worker` nodes, as two hosts would be), two groups on
queues of their own, and a 1 -> 20 -> 1 fan-in at 2 and 4 processes; per layout the
steps/s, the CPU each part used, the database's commits and WAL per step, and what the
bench database's backends were doing (on CPU, waiting on a row lock, on the WAL).

    DATABASE_URL=… CELERY_BROKER_URL=… .venv/bin/python bench/scale_out.py [--runs 1000]

Measured as bench/engine.py's `measure`: the runs are submitted while no worker runs
(their messages wait in the queue), then the workers start; steps/s on the database's
clock, from the first step's start to the last one's finish. CPU shares are of all the
machine's cores over that span (from the CPU samples around it, every 0.25 s: the
workers' start-up is left out, which at small --runs makes them rough); WAL from pg_stat_wal,
cluster-wide (another database's work on the server shows in it). The wait samples are
pg_stat_activity of the bench database, read every --sample-ms from a connection to the
`postgres` database (so they add no commit and no backend to the bench database's).

Separate queues: a process publishes every message to its own RUNS_QUEUE (Celery's
default queue, config/settings.py; runs/engine/core/publish.py names no queue), so a
group started with RUNS_QUEUE=X consumes X and X-recovery, and the steps its processes
make ready (a finish's successors, the fan's join) go to X as well: a run stays on the
queue it was submitted to. The engine's submit_run has no queue option: this process
submits each half of the runs with Celery's default queue set to that group's queue, as
a process started with RUNS_QUEUE=X would. The one cross-over is recovery: a sweep
(a worker's at start, the beat's) republishes any run's stale step to the sweeper's
queue. A message published to a queue nobody consumes waits there until a sweep
republishes the step (after RUNS_REPUBLISH_AFTER_SECONDS), and without one the run stalls.
"""

from __future__ import annotations

import argparse
import json
import os
import threading
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import common  # bench/, the directory of this script; sets Django up
import psycopg
import redis
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.db.models import Max, Min
from engine import Phase, drive

from config.celery import app as celery_app
from runs import engine
from runs.models import Attempt, Step

CHAIN, FAN = "bench-chain-pure", "bench-fan"
STEPS = {CHAIN: 10, FAN: 22}


@dataclass(frozen=True)
class Layout:
    key: str
    label: str
    workflow: str
    groups: tuple[int, ...]
    separate_queues: bool = False

    @property
    def processes(self) -> int:
        return sum(self.groups)


LAYOUTS = [
    Layout("1", "chain, 1 group x -c 1", CHAIN, (1,)),
    Layout("2", "chain, 2 groups x -c 1", CHAIN, (1, 1)),
    Layout("4", "chain, 2 groups x -c 2", CHAIN, (2, 2)),
    Layout("8", "chain, 2 groups x -c 4", CHAIN, (4, 4)),
    Layout("queues", "chain, 2 groups x -c 1, own queues", CHAIN, (1, 1), True),
    Layout("fan2", "fan-in, 2 groups x -c 1", FAN, (1, 1)),
    Layout("fan4", "fan-in, 2 groups x -c 2", FAN, (2, 2)),
    Layout("fanqueues", "fan-in, 2 groups x -c 1, own queues", FAN, (1, 1), True),
]


# --- where this process publishes ----------------------------------------------------
@contextmanager
def publishing_to(queue: str) -> Iterator[None]:
    """The messages this process sends meanwhile go to `queue`, as if it had been
    started with RUNS_QUEUE=`queue` (which only sets Celery's default queue; the router
    reads it at every send, and creates the queue it does not know)."""
    conf = celery_app.conf
    before = conf.task_default_queue
    conf.task_default_queue = queue
    try:
        yield
    finally:
        conf.task_default_queue = before


# --- what the backends wait on -------------------------------------------------------
WAL_WAITS = {"WALWrite", "WALSync", "WALInsert", "WALBufMapping", "WALSyncMethodAssign"}
ROW_LOCKS = {"transactionid", "tuple"}
# One row per active client backend of the database, or one of NULLs if there is none.
SAMPLE_SQL = """
SELECT clock_timestamp(), a.pid, a.wait_event_type, a.wait_event,
       left(regexp_replace(a.query, '\\s+', ' ', 'g'), 70)
FROM (SELECT 1) AS one
LEFT JOIN pg_stat_activity AS a
  ON a.datname = %s AND a.state = 'active' AND a.backend_type = 'client backend'
"""


@dataclass
class Sample:
    at: datetime
    active: int = 0
    on_cpu: int = 0  # active with no wait event
    lock: int = 0  # heavyweight lock (row locks: transactionid, tuple)
    row_lock: int = 0
    wal: int = 0  # LWLock WALWrite/WALInsert, IO WALSync/WALWrite


@dataclass
class WaitSampler:
    """pg_stat_activity of `dbname`'s client backends every `every` seconds, on a thread
    of its own. The bench's own polling connection is one of them (idle, mostly)."""

    dbname: str
    every: float
    samples: list[Sample] = field(default_factory=list)
    lock_waits: Counter[str] = field(default_factory=Counter)  # "event: statement"
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    error: BaseException | None = None

    def start(self) -> WaitSampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def _run(self) -> None:
        try:
            with psycopg.connect(common.dsn("postgres"), autocommit=True) as conn:
                while not self._stop.wait(self.every):
                    self._sample(conn.execute(SAMPLE_SQL, [self.dbname]).fetchall())
        except BaseException as exc:  # reported with the figures, never fatal
            self.error = exc

    def _sample(self, rows: list[tuple[Any, ...]]) -> None:
        sample = Sample(at=rows[0][0])
        for _, pid, kind, event, query in rows:
            if pid is None:
                continue
            sample.active += 1
            if kind is None:
                sample.on_cpu += 1
            elif kind == "Lock":
                sample.lock += 1
                sample.row_lock += event in ROW_LOCKS
                self.lock_waits[f"{event}: {query}"] += 1
            elif event in WAL_WAITS:
                sample.wal += 1
        self.samples.append(sample)

    def means(self, first: datetime, last: datetime) -> dict[str, Any]:
        """Mean backends per sample active, on CPU, waiting on a lock (a row lock), on
        the WAL, over the samples within [first, last]; and the share of the samples
        in which at least one waited on a lock."""
        within = [s for s in self.samples if first <= s.at <= last]
        n = len(within)
        out: dict[str, Any] = {"samples": n}
        for name in ("active", "on_cpu", "lock", "row_lock", "wal"):
            out[name] = round(sum(getattr(s, name) for s in within) / n, 2) if n else None
        out["samples_with_lock_wait"] = (
            round(sum(1 for s in within if s.lock) / n, 3) if n else None
        )
        out["top_lock_waits"] = dict(self.lock_waits.most_common(3))
        if self.error is not None:
            out["error"] = repr(self.error)
        return out


# --- one layout ----------------------------------------------------------------------
def submit(layout: Layout, count: int, queues: list[str]) -> dict[uuid.UUID, int]:
    """The runs, each with the group whose queue it was published to (-1: the queue
    every group consumes)."""
    if not queues:
        return {
            engine.submit_run(workflow=layout.workflow, input={"n": i}).id: -1 for i in range(count)
        }
    out: dict[uuid.UUID, int] = {}
    for i in range(count):
        group = i % len(queues)
        with publishing_to(queues[group]):
            out[engine.submit_run(workflow=layout.workflow, input={"n": i}).id] = group
    return out


def queue_lengths(names: list[str]) -> dict[str, int]:
    broker = common.redis_url(settings.CELERY_BROKER_URL)
    if not broker.startswith(("redis://", "rediss://", "unix://")):
        return {}
    r = redis.Redis.from_url(broker)
    return {name: int(r.llen(name)) for name in names}


def measure(layout: Layout, count: int, *, timeout: float, sample_every: float) -> dict[str, Any]:
    dbname = settings.DATABASES["default"]["NAME"]
    queues = (
        [f"{common.QUEUE}-g{i}" for i in range(len(layout.groups))]
        if layout.separate_queues
        else []
    )
    submitted = submit(layout, count, queues)
    run_ids = list(submitted)
    waiting = queue_lengths([common.QUEUE, *queues])
    workers = common.Workers(groups=layout.groups, runs_queues=queues)
    group_names = [f"group{i}" for i in range(len(layout.groups))]
    sources: dict[str, Callable[[], list[int]]] = {
        name: (lambda i=i: workers.pids(i)) for i, name in enumerate(group_names)
    }
    sources["postgres"] = lambda: common.postgres_backends(dbname)
    sources["redis"] = common.redis_pids
    # From a connection to `postgres`: it adds nothing to the bench database's counters.
    sampler = WaitSampler(dbname, sample_every).start()
    try:
        db, meter = drive(layout.label, run_ids, workers, sources, timeout)
    finally:
        sampler.stop()
    span = Step.objects.filter(run_id__in=run_ids).aggregate(
        first=Min("started_at"), last=Max("finished_at")
    )
    units = count * STEPS[layout.workflow]
    phase = Phase(layout.label, units, (span["last"] - span["first"]).total_seconds(), db)

    # CPU over the measured span only (the workers' start-up left out), from the samples
    # around it (every 0.25 s), as a share of all cores over the same samples' stretch.
    seconds = meter.between(span["first"].timestamp(), span["last"].timestamp())
    available = (os.cpu_count() or 1) * seconds["seconds"]
    cpu = {
        "workers": sum(seconds.get(g, 0.0) for g in group_names) / available,
        **{g: seconds.get(g, 0.0) / available for g in group_names},
        "postgres": seconds.get("postgres", 0.0) / available,
        "redis": seconds.get("redis", 0.0) / available,
        "machine_busy": seconds["machine_busy"],
    }
    cpu_stretch = seconds["seconds"]
    # Which group ran each attempt (its worker is "host:pid"), and the runs whose steps
    # ran in another group than the one whose queue the run was published to.
    group_of = {pid: g for g, name in enumerate(group_names) for pid in meter.seen.get(name, ())}
    per_group: Counter[int] = Counter()
    crossed: set[uuid.UUID] = set()
    for run_id, worker in Attempt.objects.filter(run_id__in=run_ids).values_list(
        "run_id", "worker"
    ):
        g = group_of.get(int(worker.rsplit(":", 1)[-1]), -1)
        per_group[g] += 1
        if submitted[run_id] >= 0 and g != submitted[run_id]:
            crossed.add(run_id)
    row: dict[str, Any] = {
        "key": layout.key,
        "layout": layout.label,
        "workflow": layout.workflow,
        "processes": layout.processes,
        "groups": list(layout.groups),
        "runs": count,
        "steps": units,
        "elapsed_s": round(phase.elapsed, 2),
        "steps_per_s": round(phase.rate, 1),
        "cpu_share": {k: round(v, 3) for k, v in cpu.items()},
        "cpu_measured_s": round(cpu_stretch, 2),
        "commits_per_step": round(phase.per_unit("xact_commit"), 2),
        "rows_written_per_step": round(
            (db["tup_inserted"] + db["tup_updated"] + db["tup_deleted"]) / units, 2
        ),
        "wal_records_per_step": round(phase.per_unit("wal_records"), 1),
        "wal_bytes_per_step": round(phase.per_unit("wal_bytes")),
        "wal_write_per_step": round(phase.per_unit("wal_write"), 3),
        "wal_sync_per_step": round(phase.per_unit("wal_sync"), 3),
        "wal_sync_per_s": round(db["wal_sync"] / phase.elapsed, 1),
        "waits": sampler.means(span["first"], span["last"]),
        "attempts_per_group": {str(g): n for g, n in sorted(per_group.items())},
    }
    if queues:
        row["queues"] = queues
        row["messages_waiting_before_start"] = waiting
        row["runs_crossing_groups"] = len(crossed)
        row["messages_left_after"] = queue_lengths([common.QUEUE, *queues])
    return row


# --- the table -----------------------------------------------------------------------
def table(rows: list[dict[str, Any]]) -> str:
    cores = os.cpu_count() or 1
    head = (
        "| layout | procs | steps/s | CPU workers / PG / Redis "
        f"(of {cores} cores) | machine | commits/step | WAL rec / bytes / syncs per step "
        "| syncs/s | backends active / on CPU / on lock (row) / on WAL | lock-wait samples |"
    )
    lines = [head, "|---|---:|---:|---|---:|---:|---|---:|---|---:|"]
    for r in rows:
        c, w = r["cpu_share"], r["waits"]

        def f(key: str, w: dict[str, Any] = w) -> str:
            return "-" if w.get(key) is None else f"{w[key]:.2f}"

        lock_share = w.get("samples_with_lock_wait")
        lines.append(
            f"| {r['layout']} | {r['processes']} | {r['steps_per_s']:,.0f} | "
            f"{c['workers']:.0%} / {c['postgres']:.0%} / {c['redis']:.0%} | "
            f"{c['machine_busy']:.0%} | {r['commits_per_step']:.2f} | "
            f"{r['wal_records_per_step']:.1f} / {r['wal_bytes_per_step']:,} / "
            f"{r['wal_sync_per_step']:.2f} | {r['wal_sync_per_s']:,.0f} | "
            f"{f('active')} / {f('on_cpu')} / {f('lock')} ({f('row_lock')}) / {f('wal')} | "
            f"{'-' if lock_share is None else f'{lock_share:.0%}'} of {w['samples']} |"
        )
    return "\n".join(lines)


def server_line() -> str:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_setting('server_version'), current_setting('fsync'), "
            "current_setting('synchronous_commit'), current_setting('wal_sync_method'), "
            "current_setting('commit_delay'), current_setting('shared_buffers')"
        )
        version, fsync, sync_commit, method, delay, buffers = cursor.fetchone()
    return (
        f"PostgreSQL {version} ({settings.DATABASES['default']['NAME']}): fsync={fsync}, "
        f"synchronous_commit={sync_commit}, wal_sync_method={method}, commit_delay={delay}, "
        f"shared_buffers={buffers}; {os.cpu_count()} cores; broker {settings.CELERY_BROKER_URL}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1000, help="runs of the chain per layout")
    parser.add_argument(
        "--fan-runs", type=int, help="runs of the fan-in (22 steps) per layout; default runs/4"
    )
    parser.add_argument(
        "--layouts",
        default=",".join(layout.key for layout in LAYOUTS),
        help="which, by key: " + ", ".join(f"{x.key} ({x.label})" for x in LAYOUTS),
    )
    parser.add_argument("--sample-ms", type=float, default=20, help="pg_stat_activity period")
    parser.add_argument("--timeout", type=float, default=900, help="seconds per layout")
    args = parser.parse_args()
    fan_runs = args.fan_runs if args.fan_runs is not None else max(1, args.runs // 4)
    keys = [k.strip() for k in args.layouts.split(",") if k.strip()]
    chosen = {x.key: x for x in LAYOUTS}
    unknown = [k for k in keys if k not in chosen]
    if unknown:
        raise SystemExit(f"unknown layout(s) {', '.join(unknown)}: {', '.join(chosen)}")
    call_command("migrate", verbosity=0)
    print(server_line())
    rows = []
    for key in keys:
        layout = chosen[key]
        count = fan_runs if layout.workflow == FAN else args.runs
        rows.append(
            measure(layout, count, timeout=args.timeout, sample_every=args.sample_ms / 1000)
        )
        print(f"  {layout.label}: {rows[-1]['steps_per_s']:,.0f} steps/s", flush=True)
    print()
    print(table(rows))
    print()
    print(
        "CPU: shares of all cores over the measured span (sampled every 0.25 s around it, "
        "the workers' start-up left out); "
        "machine: every process's. WAL: pg_stat_wal deltas (cluster-wide) per step; syncs: "
        "wal_sync, the WAL flushes. Backends: mean per pg_stat_activity sample of the bench "
        "database's active client backends, on CPU (no wait event), waiting on a "
        "heavyweight lock (a row lock: transactionid or tuple), on the WAL (WALWrite, "
        "WALSync, WALInsert); lock-wait samples: the share with one waiting at least."
    )
    for r in rows:
        top = r["waits"].get("top_lock_waits")
        if top:
            print(f"  {r['layout']}: most sampled lock waits {json.dumps(top)}")
        if "queues" in r:
            print(
                f"  {r['layout']}: attempts per group {r['attempts_per_group']}, runs whose "
                f"steps ran in another group {r['runs_crossing_groups']}, messages waiting "
                f"before start {r['messages_waiting_before_start']}, left after "
                f"{r['messages_left_after']}"
            )
    print(json.dumps({"bench": "scale_out", "rows": rows}, default=str))


if __name__ == "__main__":
    main()
