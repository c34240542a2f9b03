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
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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


def counters(url: str) -> tuple[float, float]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT xact_commit, tup_inserted + tup_updated FROM pg_stat_database "
            "WHERE datname = current_database()"
        ).fetchone()
    assert row is not None
    return float(row[0]), float(row[1])


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
    xact0, tup0 = counters(args.url)
    t0 = time.monotonic()
    with ThreadPoolExecutor(args.threads) as pool:
        results: list[Any] = list(pool.map(chain, range(args.runs)))
    elapsed = time.monotonic() - t0
    assert results == [n + STEPS for n in range(args.runs)]
    DBOS.destroy()
    time.sleep(1.1)  # the pool's backends exit; their statistics land
    xact1, tup1 = counters(args.url)
    steps = args.runs * STEPS
    print(
        json.dumps(
            {
                "steps_per_s": steps / elapsed,
                "elapsed_s": elapsed,
                # -1: the counters() read itself
                "xact_per_step": (xact1 - xact0 - 1) / steps,
                "rows_written_per_step": (tup1 - tup0) / steps,
            }
        )
    )


if __name__ == "__main__":
    main()
