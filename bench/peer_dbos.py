"""The peer: DBOS Transact running the same shape as bench-chain-pure (10 steps, each
returning its predecessor's result + 1) on the same PostgreSQL server, in a database
of its own, with `--threads` threads each running whole workflows. Prints one JSON
line: steps per second and the database's transactions per step.

    .venv/bin/python bench/peer_dbos.py --url postgresql://…/durable_perf_bench_dbos
"""

from __future__ import annotations

import argparse
import json
import logging
import resource
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import psutil
import psycopg
from dbos import DBOS, DBOSConfig

STEPS = 10


@DBOS.step()
def add_one(value: int) -> int:
    return value + 1


@DBOS.workflow()
def chain(n: int) -> int:
    value = n
    for _ in range(STEPS):
        value = add_one(value)
    return value


def counters(url: str) -> tuple[float, float, float, float]:
    """Commits and rows written in this database; WAL records and bytes (cluster-wide)."""
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit, tup_inserted + tup_updated FROM pg_stat_database "
            "WHERE datname = current_database()"
        ).fetchone()
        wal = conn.execute("SELECT wal_records, wal_bytes FROM pg_stat_wal").fetchone()
    assert row is not None and wal is not None
    return float(row[0]), float(row[1]), float(wal[0]), float(wal[1])


def backends(url: str) -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend serving this database (its pool's
    connections), from /proc, as bench/common.CpuMeter reads the engine's."""
    with psycopg.connect(url, autocommit=True) as conn:
        pids = [
            int(r[0])
            for r in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            ).fetchall()
        ]
    out = {}
    for pid in pids:
        try:
            t = psutil.Process(pid).cpu_times()
        except psutil.Error:
            continue
        out[pid] = float(t.user + t.system)
    return out


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--threads", type=int, default=4)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    config: DBOSConfig = {
        "name": "durable-runs-bench",
        "system_database_url": args.url,
        "log_level": "ERROR",
    }
    DBOS(config=config)
    DBOS.launch()
    with ThreadPoolExecutor(args.threads) as pool:  # warm-up: connections, imports
        list(pool.map(chain, range(args.threads)))
    time.sleep(1.1)
    xact0, tup0, walr0, walb0 = counters(args.url)
    pg0 = backends(args.url)
    cpu0 = own_cpu()
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.threads) as pool:
        results: list[Any] = list(pool.map(chain, range(args.runs)))
    elapsed = time.monotonic() - t0
    cpu1 = own_cpu()
    pg1 = backends(args.url)  # before destroy(): the pool's backends still live
    assert results == [n + STEPS for n in range(args.runs)]
    DBOS.destroy()
    time.sleep(1.1)  # the pool's backends exit; their statistics land
    xact1, tup1, walr1, walb1 = counters(args.url)
    steps = args.runs * STEPS
    # A backend born during the run counts whole; one that ended during it is missed
    # (DBOS keeps its pool's connections open, so none does).
    pg_cpu = sum(cpu - pg0.get(pid, 0.0) for pid, cpu in pg1.items())
    print(
        json.dumps(
            {
                "steps_per_s": steps / elapsed,
                "elapsed_s": elapsed,
                # -1: the counters() read itself
                "xact_per_step": (xact1 - xact0 - 1) / steps,
                "rows_written_per_step": (tup1 - tup0) / steps,
                # cluster-wide (pg_stat_wal): a quiet server, or other work shows too
                "wal_records_per_step": (walr1 - walr0) / steps,
                "wal_bytes_per_step": (walb1 - walb0) / steps,
                "worker_cpu_ms_per_step": (cpu1 - cpu0) * 1000 / steps,
                "postgres_cpu_ms_per_step": pg_cpu * 1000 / steps,
            }
        )
    )


if __name__ == "__main__":
    main()
