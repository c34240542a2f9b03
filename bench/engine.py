"""Engine benchmarks: print figures, assert nothing (DESIGN.md §11).

    make bench                      # embedded servers in var/bench/
    DATABASE_URL=… CELERY_BROKER_URL=… .venv/bin/python bench/engine.py

1. Statements and transactions per step and per map item, counted in-process.
2. Throughput with one real worker process (prefork, concurrency 2): single-step runs
   per second, and map items per second.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
os.environ.setdefault("RUNS_QUEUE", f"durable-runs-bench-{uuid.uuid4().hex[:6]}")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402

from runs import engine  # noqa: E402
from runs.models import Run, Step  # noqa: E402
from runs.states import RUN_FINISHED  # noqa: E402


def count_statements(fn) -> tuple[int, int]:
    with CaptureQueriesContext(connection) as ctx:
        fn()
    sql = [q["sql"].strip().upper() for q in ctx.captured_queries]
    control = ("BEGIN", "COMMIT", "SAVEPOINT", "RELEASE", "ROLLBACK")
    statements = [s for s in sql if not s.startswith(control)]
    return len(statements), sum(1 for s in sql if s == "COMMIT")


def per_step_costs() -> None:
    run = engine.submit_run(workflow="charge-payment", input={"amount": 1})
    step = Step.objects.get(run=run)
    n, tx = count_statements(lambda: engine.execute_step(step_id=step.id, worker="bench"))
    print(f"idempotent step (start + effect + finish): {n} statements in {tx} transactions")

    run = engine.submit_run(workflow="migrate-records", input={"count": 100, "batch_size": 100})
    engine.execute_step(step_id=Step.objects.get(run=run, key="list_records").id, worker="bench")
    batch = Step.objects.get(run=run, key="migrate[0]")
    n, tx = count_statements(lambda: engine.execute_step(step_id=batch.id, worker="bench"))
    print(
        f"map batch of 100 transactional items: {n} statements in {tx} transactions "
        f"({n / 100:.2f} statements per item)"
    )


def wait_all(runs: list[Run], timeout: float) -> float:
    ids = [r.id for r in runs]
    start = time.monotonic()
    while Run.objects.filter(pk__in=ids).exclude(status__in=RUN_FINISHED).exists():
        if time.monotonic() - start > timeout:
            raise SystemExit("benchmark timed out")
        time.sleep(0.05)
    return time.monotonic() - start


def throughput(n_runs: int, n_items: int) -> None:
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "config",
            "worker",
            "--concurrency",
            "2",
            "--loglevel",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=dict(os.environ),
    )
    try:
        time.sleep(3)  # worker start-up is not what we measure
        t0 = time.monotonic()
        runs = [
            engine.submit_run(workflow="charge-payment", input={"amount": 1}) for _ in range(n_runs)
        ]
        submit = time.monotonic() - t0
        elapsed = wait_all(runs, 600) + submit
        print(
            f"{n_runs} charge-payment runs: {n_runs / elapsed:.0f} runs/s "
            f"(submit {n_runs / submit:.0f}/s)"
        )
        t0 = time.monotonic()
        run = engine.submit_run(
            workflow="migrate-records", input={"count": n_items, "batch_size": 100}
        )
        elapsed = wait_all([run], 600)
        print(
            f"migrate-records, {n_items} items in batches of 100: {n_items / elapsed:.0f} items/s"
        )
    finally:
        worker.terminate()
        worker.wait(30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--items", type=int, default=5000)
    args = parser.parse_args()
    call_command("migrate", verbosity=0)
    print(
        f"PostgreSQL {connection.pg_version}, "
        f"broker {os.environ.get('CELERY_BROKER_URL', 'default')}"
    )
    per_step_costs()
    throughput(args.runs, args.items)


if __name__ == "__main__":
    main()
