"""Server time and queries per page, on the seeded UI database (bench/seed_ui.py).

    make bench-ui                                   # seed if needed, then this
    DATABASE_URL=… .venv/bin/python bench/ui.py [--explain 2]

Each page is requested in-process through Django's test Client, logged in as an
operator: `--warmup` requests first, then `--requests` timed ones (median and p95 of
the whole request: middleware, view, queries, template). One more request, under an
execute wrapper, counts the page's queries and times each. Prints one table, then
one JSON line. `--explain N` also prints `EXPLAIN (ANALYZE, BUFFERS)` of the N
slowest queries of each page. Figures, not assertions: tests/pages/test_query_budgets.py
asserts the query counts.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
import warnings
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import uidb  # bench/, the directory of this script

BUDGET_MS = 150.0  # every page under 150 ms of server time


@dataclass
class Figure:
    name: str
    path: str
    median_ms: float
    p95_ms: float
    queries: int
    db_ms: float
    slowest: list[tuple[float, str, Any]]  # (ms, sql, params), the slowest first


HTMX_RUNS = {"HX-Request": "true", "HX-Target": "runs"}  # the list's htmx swap


def pages() -> list[tuple[str, str, dict[str, str]]]:
    """(name, path, headers) of every page measured, with search terms and ids taken
    from the seeded data."""
    from django.db.models import Count
    from django.utils import timezone

    from runs.models import Claim, Run, RunSearchKey, SubmissionKey

    marker = seed_marker()
    big = marker["big_run"]
    runs = marker["runs"]  # a run a twentieth of the way in, and so on
    old = Run.objects.order_by("created_at", "id").values_list("id", flat=True)[runs // 20]
    claim = Claim.objects.filter(item_key__isnull=True, run__workflow="merge-change")
    claim_key = claim.order_by("id").values_list("key", flat=True)[runs // 100]
    submission = SubmissionKey.objects.order_by("key").values_list("key", flat=True)[runs // 50]
    # A merge's change id (each merge has its own), and the amount most charges share.
    change = RunSearchKey.objects.filter(field="change_id").order_by("value")
    change_id = change.values_list("value", flat=True)[runs // 100]
    amounts = RunSearchKey.objects.filter(field="amount").values("value")
    amount = amounts.annotate(n=Count("id")).order_by("-n", "value")[0]["value"]
    by_change = f"field=change_id&value={change_id}"
    now = timezone.localtime()
    today = now.date()
    week = f"created_after={(now - timedelta(days=14)):%Y-%m-%d}"
    week += f"&created_before={(now - timedelta(days=8)):%Y-%m-%d}"
    plain: dict[str, str] = {}
    return [
        ("runs list", "/runs/", plain),
        ("runs, status=succeeded", "/runs/?status=succeeded", plain),
        ("runs, status=failed", "/runs/?status=failed", plain),
        ("runs, workflow=merge-change", "/runs/?workflow=merge-change", plain),
        ("runs, status+workflow", "/runs/?status=failed&workflow=charge-payment", plain),
        ("runs, created in a week", f"/runs/?{week}", plain),
        ("runs, search id prefix", f"/runs/?q={str(old)[:8]}", plain),
        ("runs, search submission key", f"/runs/?q={submission}", plain),
        ("runs, search claim key", f"/runs/?q={claim_key}", plain),
        ("runs list filtered by a search field", f"/runs/?{by_change}", plain),
        ("runs, search field shared by many", f"/runs/?field=amount&value={amount}", plain),
        ("search box by a field value", f"/runs/?q={change_id}", plain),
        ("api runs, search field", f"/api/runs/?{by_change}", plain),
        ("runs, page 50", "/runs/?page=50", plain),
        ("runs, htmx swap of page 2", "/runs/?page=2", HTMX_RUNS),
        ("run page, 2,000 events", f"/runs/{big}/", plain),
        ("run page, events page 15", f"/runs/{big}/?page=15", plain),
        ("run page, event type filter", f"/runs/{big}/?type=batch_finished", plain),
        ("overview", "/", plain),
        ("reconciliation queue", "/reconciliation/", plain),
        # The decision reports: the default 30 days (the seed's whole span), one day
        # (counted per hour), a year (the longest period), and one CSV.
        ("reports, last 30 days", "/reports/", plain),
        ("reports, one day (per hour)", f"/reports/?since={today}&until={today}", plain),
        (
            "reports, 366 days",
            f"/reports/?since={today - timedelta(days=365)}&until={today}",
            plain,
        ),
        ("reports CSV, time to decide", "/reports/time-to-decide.csv", plain),
    ]


def seed_marker() -> dict[str, Any]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [uidb.SEED_TABLE])
        if cursor.fetchone()[0]:
            cursor.execute(f"SELECT params FROM {uidb.SEED_TABLE} ORDER BY seeded_at DESC")
            row = cursor.fetchone()
            if row:
                return dict(json.loads(row[0]))  # Django reads jsonb as text
    raise SystemExit("the UI database is not seeded: run bench/seed_ui.py first")


def operator_client() -> Any:
    from django.contrib.auth.models import User
    from django.test import Client

    from runs.management.commands.createoperator import grant_role

    user, created = User.objects.get_or_create(username="bench-operator")
    if created:
        user.set_unusable_password()
        user.save()
        grant_role(user, "operators")
    client = Client()
    client.force_login(user)
    return client


def get(client: Any, path: str, headers: dict[str, str]) -> Any:
    response = client.get(path, headers=headers)
    if response.status_code != 200:
        raise SystemExit(f"GET {path} answered {response.status_code}")
    return response


class Timed:
    """An execute wrapper that times each query of a request: (ms, sql, params)."""

    def __init__(self) -> None:
        self.queries: list[tuple[float, str, Any]] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.queries.append(((time.perf_counter() - t0) * 1000, sql, params))


def measure(
    client: Any, name: str, path: str, headers: dict[str, str], warmup: int, requests: int
) -> Figure:
    from django.db import connection

    for _ in range(warmup):
        get(client, path, headers)
    times = []
    for _ in range(requests):
        t0 = time.perf_counter()
        get(client, path, headers)
        times.append((time.perf_counter() - t0) * 1000)
    timed = Timed()
    with connection.execute_wrapper(timed):
        get(client, path, headers)
    return Figure(
        name=name,
        path=path,
        median_ms=statistics.median(times),
        p95_ms=statistics.quantiles(times, n=20, method="inclusive")[18],
        queries=len(timed.queries),
        db_ms=sum(ms for ms, _, _ in timed.queries),
        slowest=sorted(timed.queries, key=lambda q: q[0], reverse=True),
    )


def explain(sql: str, params: Any) -> list[str]:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
        return [row[0] for row in cursor.fetchall()]


def machine() -> dict[str, Any]:
    from django.db import connection

    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if "model name" in line), "")
    except OSError:
        pass
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        server = cursor.fetchone()[0]
        cursor.execute("SHOW shared_buffers")
        buffers = cursor.fetchone()[0]
    return {
        # Other work on the machine shows in the figures: say how busy it was.
        "load_average_1min": round(os.getloadavg()[0], 2),
        "cores": os.cpu_count(),
        "cpu": cpu,
        "python": platform.python_version(),
        "postgresql": server,
        "shared_buffers": buffers,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="default: <DATABASE_URL's name>_ui_bench")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument(
        "--explain", type=int, default=0, metavar="N", help="EXPLAIN the N slowest queries"
    )
    parser.add_argument("--only", help="measure only the pages whose name contains this")
    args = parser.parse_args()

    uidb.use_bench_database(args.database)
    uidb.setup_django()
    from django.conf import settings
    from django.core.management import call_command

    from runs.models import Event, Run

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    # No collectstatic for a benchmark: whitenoise need not say so on every start.
    warnings.filterwarnings("ignore", message="No directory at", module="django.core.handlers")
    call_command("migrate", verbosity=0)  # the indexes of this checkout
    marker = seed_marker()
    info = machine()
    data = {"runs": Run.objects.count(), "events": Event.objects.count()}
    print(
        f"{data['runs']:,} runs, {data['events']:,} events; PostgreSQL {info['postgresql']} "
        f"(shared_buffers {info['shared_buffers']}), {info['cores']} cores ({info['cpu']}), "
        f"load average {info['load_average_1min']}"
    )
    client = operator_client()
    figures = []
    for name, path, headers in pages():
        if args.only and args.only not in name:
            continue
        figures.append(measure(client, name, path, headers, args.warmup, args.requests))

    width = max(len(f.name) for f in figures)
    print(f"\n{'page':<{width}}  median ms  p95 ms  queries  db ms  slowest query ms")
    for f in figures:
        flag = "" if f.median_ms < BUDGET_MS else f"  over {BUDGET_MS:.0f} ms"
        print(
            f"{f.name:<{width}}  {f.median_ms:9.1f}  {f.p95_ms:6.1f}  {f.queries:7d}  "
            f"{f.db_ms:5.1f}  {f.slowest[0][0] if f.slowest else 0:16.1f}{flag}"
        )
    if args.explain:
        for f in figures:
            print(f"\n== {f.name}: {f.path}")
            for ms, sql, params in f.slowest[: args.explain]:
                print(f"-- {ms:.1f} ms: {sql[:300]}{'…' if len(sql) > 300 else ''}")
                for line in explain(sql, params):
                    print("   " + line)
    print(
        json.dumps(
            {
                "bench": "ui",
                "machine": info,
                "data": {**data, "big_run_events": marker.get("big_run_events")},
                "pages": {
                    f.name: {
                        "path": f.path,
                        "median_ms": round(f.median_ms, 1),
                        "p95_ms": round(f.p95_ms, 1),
                        "queries": f.queries,
                    }
                    for f in figures
                },
            }
        )
    )


if __name__ == "__main__":
    main()
