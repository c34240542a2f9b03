"""What the engine benchmarks share: Django set up on the bench database, worker
processes, database counters and process CPU.

Imported first by bench/engine.py, bench/scale.py and bench/scale_out.py (scripts run
from the repository root; bench/ is on sys.path as the script's directory)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# A queue of its own, so a bench never consumes (or is consumed by) another worker's.
os.environ.setdefault("RUNS_QUEUE", f"durable-runs-bench-{uuid.uuid4().hex[:6]}")
# The examples and the bench's own workflows (a deployment registers none unless told).
_modules = os.environ.get("RUNS_WORKFLOW_MODULES") or "examples.workflows"
if "bench.workflows" not in _modules:
    os.environ["RUNS_WORKFLOW_MODULES"] = f"{_modules},bench.workflows"

import django  # noqa: E402

django.setup()

import psycopg  # noqa: E402
from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402

QUEUE = os.environ["RUNS_QUEUE"]


def dsn(dbname: str | None = None) -> str:
    """A libpq connection string for the configured server (another database if named)."""
    db = settings.DATABASES["default"]
    parts = {
        "host": db.get("HOST") or "127.0.0.1",
        "port": str(db.get("PORT") or 5432),
        "user": db.get("USER") or "postgres",
        "dbname": dbname or db["NAME"],
    }
    if db.get("PASSWORD"):
        parts["password"] = db["PASSWORD"]
    return " ".join(f"{k}={v}" for k, v in parts.items())


def url(dbname: str) -> str:
    """A URL of the configured server's database `dbname` (for the peer, DBOS). A Unix
    socket directory (the embedded PostgreSQL of `make bench`) goes in the query: a path
    cannot be the URL's host."""
    db = settings.DATABASES["default"]
    auth = quote(db.get("USER") or "postgres", safe="")
    if db.get("PASSWORD"):
        auth += f":{quote(db['PASSWORD'], safe='')}"
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    if host.startswith("/"):
        return f"postgresql://{auth}@/{dbname}?host={quote(host, safe='')}&port={port}"
    return f"postgresql://{auth}@{host}:{port}/{dbname}"


def ensure_database(name: str) -> None:
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone() is None:
            conn.execute(f'CREATE DATABASE "{name}"')


def close_django() -> None:
    """Close this process's connection: its backend exits and flushes its statistics."""
    connection.close()


# --- worker processes ----------------------------------------------------------------
def _worker_log() -> Any:
    path = ROOT / "var" / "bench-workers.log"
    path.parent.mkdir(exist_ok=True)
    return path.open("ab")


@dataclass
class Workers:
    """Celery worker process groups (`celery worker -c N` each, prefork, acks_late by
    the project's settings), one node name per group."""

    groups: Sequence[int] = (2,)
    app: str = "config"
    queues: str = ""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    # Per group, a RUNS_QUEUE of its own, as deployments sharing one database would
    # have: the group consumes only that queue and its recovery queue, and its processes
    # publish the steps they make ready to it. Empty: every group on `queues` (QUEUE's).
    runs_queues: Sequence[str] = ()

    def start(self) -> Workers:
        if self.runs_queues and len(self.runs_queues) != len(self.groups):
            raise ValueError("one runs queue per worker group")
        for index, concurrency in enumerate(self.groups):
            env = dict(os.environ)
            queues = self.queues or f"{QUEUE},{QUEUE}-recovery"
            if self.runs_queues:
                env["RUNS_QUEUE"] = own = self.runs_queues[index]
                queues = f"{own},{own}-recovery"
            self.procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "celery",
                        "-A",
                        self.app,
                        "worker",
                        "--concurrency",
                        str(concurrency),
                        "--pool",
                        "prefork",
                        "-Q",
                        queues,
                        "-n",
                        f"bench{index}-{uuid.uuid4().hex[:4]}@%h",
                        "--loglevel",
                        "WARNING",
                        "--without-gossip",
                        "--without-mingle",
                        "--without-heartbeat",
                    ],
                    cwd=ROOT,
                    env=env,
                    start_new_session=True,
                    # The workers' banners and warnings would bury the table.
                    stdout=subprocess.DEVNULL,
                    stderr=_worker_log(),
                )
            )
        return self

    def pids(self, group: int | None = None) -> list[int]:
        """The group leaders and their pool processes (of one group, if named)."""
        import psutil

        out: list[int] = []
        for proc in self.procs if group is None else self.procs[group : group + 1]:
            try:
                parent = psutil.Process(proc.pid)
                out.append(parent.pid)
                out.extend(child.pid for child in parent.children(recursive=True))
            except psutil.NoSuchProcess:
                pass
        return out

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self.procs.clear()

    def __enter__(self) -> Workers:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


# --- database counters ---------------------------------------------------------------
COUNTERS = ("xact_commit", "xact_rollback", "tup_inserted", "tup_updated", "tup_deleted")


class DbCounters:
    """Deltas of pg_stat_database for the bench database (and pg_stat_wal, which is
    cluster-wide: other databases' work on the same server shows in it). Statistics of
    a backend reach pg_stat_database when it goes idle (at most once a second) or
    exits: read them after the workers have stopped. Each read is one transaction of
    its own, which `own` counts and `delta` subtracts."""

    def __init__(self) -> None:
        self.conn = psycopg.connect(dsn(), autocommit=True)
        self.own = 0
        self.statements_extension = bool(
            self._query(
                "SELECT 1 FROM pg_extension WHERE extname = 'pg_stat_statements'"
                " AND current_setting('shared_preload_libraries') LIKE '%%pg_stat_statements%%'"
            )
        )

    def _query(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        self.own += 1
        return self.conn.execute(sql, list(params)).fetchall()

    def snapshot(self) -> dict[str, float]:
        # A fresh backend: the polling one's own statistics are flushed when it exits.
        self.conn.close()
        self.conn = psycopg.connect(dsn(), autocommit=True)
        time.sleep(1.1)  # let exited/idle backends' statistics land
        row = self._query(
            f"SELECT {', '.join(COUNTERS)} FROM pg_stat_database WHERE datname = current_database()"
        )[0]
        out = dict(zip(COUNTERS, (float(v) for v in row), strict=True))
        wal = self._query("SELECT wal_records, wal_bytes, wal_write, wal_sync FROM pg_stat_wal")[0]
        out.update(
            {
                "wal_records": float(wal[0]),
                "wal_bytes": float(wal[1]),
                "wal_write": float(wal[2]),
                "wal_sync": float(wal[3]),
            }
        )
        if self.statements_extension:
            calls = self._query(
                "SELECT coalesce(sum(calls), 0) FROM pg_stat_statements s "
                "JOIN pg_database d ON d.oid = s.dbid WHERE d.datname = current_database()"
            )[0][0]
            out["statements"] = float(calls)
        return out

    def poll(self, sql: str, params: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        return self._query(sql, params)

    def delta(self, before: dict[str, float], after: dict[str, float], own_before: int) -> dict:
        d = {k: after[k] - before[k] for k in after}
        # This connection's own autocommit reads, between the two snapshots included.
        d["xact_commit"] -= self.own - own_before
        return d

    def close(self) -> None:
        self.conn.close()


def wait_until(poll: Any, timeout: float, every: float = 0.25) -> None:
    deadline = time.monotonic() + timeout
    while not poll():
        if time.monotonic() > deadline:
            raise SystemExit("benchmark timed out")
        time.sleep(every)


# --- process CPU ---------------------------------------------------------------------
class CpuMeter:
    """CPU seconds used by sets of processes between start() and stop(), from /proc
    (psutil): the workers, the PostgreSQL backends serving the bench database, Redis."""

    def __init__(self, groups: dict[str, Any]) -> None:
        import psutil

        self.groups = groups  # name -> callable returning pids
        self.started = time.time()
        psutil.cpu_percent(None)  # starts the machine-wide count
        self.t0: dict[int, float] = {}
        self.seen: dict[str, set[int]] = {}
        self.last: dict[int, float] = {}
        # After each sample: its time, each group's CPU seconds so far, and the
        # machine's busy and total CPU seconds (all cores), for between().
        self.history: list[tuple[float, dict[str, float], float, float]] = []

    @staticmethod
    def _cpu(pid: int) -> float | None:
        import psutil

        try:
            t = psutil.Process(pid).cpu_times()
            return float(t.user + t.system)
        except psutil.Error:
            return None

    def _born_after_start(self, pid: int) -> bool:
        import psutil

        try:
            return bool(psutil.Process(pid).create_time() >= self.started)
        except psutil.Error:
            return False

    def sample(self) -> None:
        for name, pids in self.groups.items():
            for pid in pids():
                self.seen.setdefault(name, set()).add(pid)
                cpu = self._cpu(pid)
                if cpu is not None:
                    self.t0.setdefault(pid, 0.0 if self._born_after_start(pid) else cpu)
                    self.last[pid] = cpu
        import psutil

        times = psutil.cpu_times()
        idle = times.idle + getattr(times, "iowait", 0.0)
        total = sum(times)
        totals = {
            name: sum(self.last.get(p, 0.0) - self.t0.get(p, 0.0) for p in pids)
            for name, pids in self.seen.items()
        }
        self.history.append((time.time(), totals, total - idle, total))

    def between(self, start: float, end: float) -> dict[str, float]:
        """CPU seconds per group from the last sample at or before `start` to the first
        at or after `end` (epoch seconds; the samples' period is the error), without the
        processes' start-up before it; `machine_busy` as in seconds(), over that stretch,
        and `seconds`, its length."""
        if not self.history:
            return {}
        before = [h for h in self.history if h[0] <= start] or self.history[:1]
        after = [h for h in self.history if h[0] >= end] or self.history[-1:]
        (t0, a, busy0, total0), (t1, b, busy1, total1) = before[-1], after[0]
        out = {name: b.get(name, 0.0) - a.get(name, 0.0) for name in b}
        out["machine_busy"] = (busy1 - busy0) / (total1 - total0) if total1 > total0 else 0.0
        out["seconds"] = t1 - t0
        return out

    def seconds(self) -> dict[str, float]:
        """CPU seconds per group, and `machine_busy`: the fraction of all cores busy
        meanwhile, every process's (other users' too)."""
        import psutil

        busy = psutil.cpu_percent(None) / 100  # every process's, all cores, since start
        out = {
            name: sum(self.last.get(p, 0.0) - self.t0.get(p, 0.0) for p in pids)
            for name, pids in self.seen.items()
        }
        out["machine_busy"] = busy
        return out


# The connection postgres_backends() lists over, kept: a connection per sample (ten a
# second) would fork a backend each time on the machine being measured, a tax the
# measured phase paid and the ceiling did not.
_lister: psycopg.Connection[Any] | None = None


def postgres_backends(dbname: str) -> list[int]:
    """The pids of the backends connected to `dbname` (the lister's own connects to
    `postgres`, so it is never among them)."""
    global _lister
    query = "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
    if _lister is None or _lister.closed:
        _lister = psycopg.connect(dsn("postgres"), autocommit=True)
    try:
        rows = _lister.execute(query, [dbname]).fetchall()
    except psycopg.OperationalError:
        # The server restarted under a long bench: once more, on a new connection.
        _lister.close()
        _lister = psycopg.connect(dsn("postgres"), autocommit=True)
        rows = _lister.execute(query, [dbname]).fetchall()
    return [int(r[0]) for r in rows]


def redis_pids() -> list[int]:
    import psutil

    return [
        p.pid for p in psutil.process_iter(["name"]) if (p.info["name"] or "").startswith("redis")
    ]


def redis_url(broker_url: str) -> str:
    """The broker's URL as redis-py reads it: Celery's `redis+socket://PATH` (the embedded
    Redis of `make bench`) is redis-py's `unix://PATH`."""
    if broker_url.startswith("redis+socket://"):
        return "unix://" + broker_url[len("redis+socket://") :]
    return broker_url
