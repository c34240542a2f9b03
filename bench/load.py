"""The web tier under load while a step backlog drains (docs/performance.md): locust
against gunicorn.

    DURABLE_RUNS_VAR=var-load .venv/bin/python scripts/stack.py run \\
        .venv/bin/python bench/load.py [--users-submit 50 --operators 5 --duration 120]

On a database of its own (`<DATABASE_URL's name>_load_bench`, dropped and made again
each time, migrated): an operator (signed in through the login page) and one submitter
account per client (an API token each), a few unresolved claims (runs whose worker died
in their guarded step), and a backlog: `--backlog-runs` migrate-records runs whose
first step has run, so their map batches (at least 2,000 by default) are queued. Then
gunicorn as deployed (config/gunicorn.py) on a free port, `celery worker -c 2` draining
the backlog (bench/common.py's Workers), and locust, headless
(bench/locustfile_load.py): `--users-submit` clients submitting small runs with
`POST /api/runs/` and Idempotency-Keys (some repeated: the same run must answer), and
`--operators` operators reading the reconciliation queue, claims, the runs list, run
pages and the API's list.

Meanwhile, once a second: the connections to the database by whom (web, workers;
pg_stat_activity, by application_name) and the queued map batches. Prints per endpoint
the requests, failures and p50/p95/p99 ms (computed from every request), the 5xx and the
429s (the API's throttle: deliberate, not failures), the connections, the backlog's
drain, and the machine's load; then one JSON line. Exits 1 on any 5xx or any failure
that is not a 429.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import uidb  # bench/, the directory of this script

SUFFIX = "_load_bench"
MIN_BACKLOG = 2000  # map batches queued when the load starts
BUDGET_MS = 500.0  # p95 of the queue page and of POST /api/runs/ (docs/performance.md)
WEB_APP, WORKER_APP = "load-web", "load-worker"
ACCESS_FORMAT = "load-access %(m)s %(U)s %(s)s %(M)s"


def fresh_database(name: str | None) -> str:
    """The bench database, dropped first if it exists: each load run starts empty."""
    import psycopg
    from psycopg import sql

    url = os.environ.get("DATABASE_URL") or uidb.DEFAULT_URL
    configured = unquote(urlsplit(url).path.lstrip("/")) or "durable_runs"
    target = name or f"{configured}{SUFFIX}"
    for maintenance in ("postgres", configured):
        try:
            conn = psycopg.connect(uidb._with_database(url, maintenance), autocommit=True)
        except psycopg.OperationalError:
            continue
        with conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(target))
            )
        break
    return uidb.use_bench_database(target)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


def accounts(submitters: int) -> dict[str, Any]:
    """The operator (a password, for the login page, and an API token) and one submitter
    account per client, each with a token."""
    from django.contrib.auth.models import User
    from knox.models import get_token_model

    from runs.management.commands.createoperator import grant_role

    token_model = get_token_model()
    password = uuid.uuid4().hex
    operator = User.objects.create_user("load-operator", password=password)
    grant_role(operator, "operators")
    tokens = []
    for n in range(submitters):
        user = User.objects.create_user(f"load-submitter-{n}")
        user.set_unusable_password()
        grant_role(user, "submitters")
        tokens.append(str(token_model.objects.create(user=user)[1]))
    return {
        "operator": operator.username,
        "password": password,
        "operator_token": str(token_model.objects.create(user=operator)[1]),
        "submitter_tokens": tokens,
    }


def seed_claims(count: int) -> list[int]:
    """`count` merge-change runs whose worker died in their guarded step: unresolved
    claims for the queue page (tests/support/factories.py's crashed(), as the tests
    make them)."""
    from tests.support import factories

    return [claim.id for claim in factories.crashed("merge-change", count=count)]


def seed_backlog(runs: int, records: int, batch_size: int) -> list[str]:
    """`runs` migrate-records runs, each first step run here: their batches are queued
    (and published) for the workers to drain."""
    from runs import engine
    from runs.models import Step
    from runs.states import StepStatus

    ids = []
    for _ in range(runs):
        run = engine.submit_run(
            workflow="migrate-records", input={"count": records, "batch_size": batch_size}
        )
        first = Step.objects.get(run=run, name="list_records", status=StepStatus.QUEUED)
        engine.execute_step(step_id=first.id, worker="load-seed")
        ids.append(str(run.id))
    return ids


def renice(workers: Any, nice: int) -> None:
    """The workers' processes (leaders, and their pool processes once forked) at `nice`:
    on one machine, the drain then gives way to the web tier for the CPU."""
    import psutil

    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        pids = workers.pids()
        for pid in pids:
            try:
                psutil.Process(pid).nice(nice)
            except psutil.Error:
                pass
        if len(pids) > len(workers.procs):  # the pool processes are there too
            return
        time.sleep(0.2)


class Sampler(threading.Thread):
    """Once a second: the database's connections per application_name (web, workers,
    others) and the queued map batches, on a connection of its own (not counted)."""

    def __init__(self, dsn: str, dbname: str) -> None:
        super().__init__(daemon=True)
        self.dsn, self.dbname = dsn, dbname
        self.samples: list[dict[str, Any]] = []
        self.stopping = threading.Event()
        self.on_sample: Any = None

    def run(self) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            started = time.monotonic()
            while not self.stopping.is_set():
                by_app = dict(
                    conn.execute(
                        "SELECT application_name, count(*) FROM pg_stat_activity"
                        " WHERE datname = %s AND pid <> pg_backend_pid() GROUP BY 1",
                        [self.dbname],
                    ).fetchall()
                )
                active = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
                    " AND pid <> pg_backend_pid() AND state <> 'idle'",
                    [self.dbname],
                ).fetchone()
                queued = conn.execute(
                    "SELECT count(*) FROM runs_step WHERE parent_id IS NOT NULL"
                    " AND status = 'queued'"
                ).fetchone()
                self.samples.append(
                    {
                        "t": time.monotonic() - started,
                        "web": int(by_app.get(WEB_APP, 0)),
                        "workers": int(by_app.get(WORKER_APP, 0)),
                        "all": int(sum(by_app.values())),
                        "active": int(active[0]) if active else 0,
                        "queued_batches": int(queued[0]) if queued else 0,
                    }
                )
                if self.on_sample is not None:
                    self.on_sample()
                self.stopping.wait(1.0)

    def stop(self) -> list[dict[str, Any]]:
        self.stopping.set()
        self.join(10)
        return self.samples


def percentile(sorted_ms: list[float], p: int) -> float:
    if len(sorted_ms) == 1:
        return sorted_ms[0]
    return statistics.quantiles(sorted_ms, n=100, method="inclusive")[p - 1]


def figures(records: dict[str, list[list[Any]]]) -> list[dict[str, Any]]:
    rows = []
    for name, entries in sorted(records.items()):
        ms = sorted(float(e[1]) for e in entries)
        statuses = [int(e[0]) for e in entries]
        rows.append(
            {
                "endpoint": name,
                "requests": len(entries),
                "failures": sum(1 for e in entries if e[2] and int(e[0]) != 429),
                "5xx": sum(1 for s in statuses if s >= 500),
                "429": sum(1 for s in statuses if s == 429),
                "p50": percentile(ms, 50),
                "p95": percentile(ms, 95),
                "p99": percentile(ms, 99),
                "max": ms[-1],
            }
        )
    return rows


ID = re.compile(r"/(?:[0-9a-f]{8}-[0-9a-f-]{27}|[0-9a-f]{32}|\d+)(?=/)")


def access_times(log: Path) -> dict[str, list[float]]:
    """gunicorn's own time per request (ms), by method and path with ids as [id] (the
    query string is not in the access log)."""
    out: dict[str, list[float]] = {}
    for line in log.read_text(errors="replace").splitlines():
        at = line.find("load-access ")
        if at < 0:
            continue
        parts = line[at:].split()
        if len(parts) != 5:
            continue
        _, method, path, _status, ms = parts
        out.setdefault(f"{method} {ID.sub('/[id]', path)}", []).append(float(ms))
    return out


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    except OSError:
        return "load average {:.2f}, {:.2f}, {:.2f}".format(*os.getloadavg())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users-submit", type=int, default=50, help="submitting clients")
    parser.add_argument("--operators", type=int, default=5, help="operators on the pages")
    parser.add_argument("--duration", type=int, default=120, help="seconds of load")
    parser.add_argument(
        "--warmup",
        type=float,
        default=15.0,
        help="seconds after every user has started (and the operators signed in) before"
        " the table's figures count; the whole run's are printed too",
    )
    parser.add_argument("--spawn-rate", type=float, default=10.0, help="users started per s")
    parser.add_argument("--backlog-runs", type=int, default=40, help="migrate-records runs")
    parser.add_argument("--records", type=int, default=5000, help="records per backlog run")
    parser.add_argument("--batch-size", type=int, default=50, help="records per map batch")
    parser.add_argument("--claims", type=int, default=8, help="unresolved claims")
    parser.add_argument("--worker-concurrency", type=int, default=2, help="celery worker -c")
    parser.add_argument(
        "--worker-nice",
        type=int,
        default=0,
        help="the workers' CPU priority (nice; 0: as the web's, as `make up` runs them)",
    )
    parser.add_argument("--repeat-share", type=float, default=0.1, help="repeated keys")
    parser.add_argument("--gunicorn-workers", type=int, help="default: config/gunicorn.py's")
    parser.add_argument("--gunicorn-threads", type=int, help="default: config/gunicorn.py's")
    parser.add_argument(
        "--gunicorn-arg",
        action="append",
        default=[],
        help="one more argument for gunicorn (repeatable), e.g. --gunicorn-arg=--keep-alive=75",
    )
    parser.add_argument("--throttle-user", help="API_THROTTLE_USER (default: the setting's)")
    parser.add_argument("--database", help=f"default: <DATABASE_URL's name>{SUFFIX}")
    args = parser.parse_args()

    dbname = fresh_database(args.database)
    # The seeding here logs each step it runs; the servers started below log as deployed.
    server_log_level = os.environ.get("LOG_LEVEL")
    os.environ["LOG_LEVEL"] = "WARNING"
    # common sets Django up (on that database) and a queue of the bench's own.
    import common
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    var = common.ROOT / (os.environ.get("DURABLE_RUNS_VAR") or "var") / "load"
    var.mkdir(parents=True, exist_ok=True)

    t0 = time.monotonic()
    fixture = accounts(args.users_submit)
    fixture["claim_ids"] = seed_claims(args.claims)
    backlog = seed_backlog(args.backlog_runs, args.records, args.batch_size)
    fixture["run_ids"] = backlog
    from runs.models import Step

    queued = Step.objects.filter(parent__isnull=False, status="queued").count()
    print(
        f"database {dbname}: {args.claims} unresolved claims, {len(backlog)} migrate-records"
        f" runs, {queued:,} map batches queued ({args.records:,} records in batches of"
        f" {args.batch_size}) in {time.monotonic() - t0:.0f}s",
        flush=True,
    )
    if queued < MIN_BACKLOG:
        print(f"note: fewer than {MIN_BACKLOG:,} batches queued (its figures need as many)")
    common.close_django()
    fixture_path = var / "fixture.json"
    fixture_path.write_text(json.dumps(fixture))
    results_path = var / "results.json"
    results_path.unlink(missing_ok=True)

    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ,
        "RUNS_QUEUE": common.QUEUE,
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "PYTHONUNBUFFERED": "1",
        "PGAPPNAME": WEB_APP,
    }
    env.pop("LOG_LEVEL")
    if server_log_level is not None:
        env["LOG_LEVEL"] = server_log_level
    if args.throttle_user:
        env["API_THROTTLE_USER"] = args.throttle_user
    web_args = [
        sys.executable, "-m", "gunicorn", "-c", "config/gunicorn.py", "config.wsgi:application",
        "--bind", f"127.0.0.1:{port}",
        # The server's own time per request (from the worker taking it to the last byte:
        # no wait in the listen queue), read back for the table.
        "--access-logformat", ACCESS_FORMAT,
    ]  # fmt: skip
    if args.gunicorn_workers:
        web_args += ["--workers", str(args.gunicorn_workers)]
    if args.gunicorn_threads:
        web_args += ["--threads", str(args.gunicorn_threads)]
    web_args += args.gunicorn_arg
    web_log = (var / "gunicorn.log").open("wb")
    web = subprocess.Popen(
        web_args, cwd=common.ROOT, env=env, stdout=web_log, stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip
    # The workers copy this process's environment.
    os.environ["PGAPPNAME"] = WORKER_APP
    os.environ.pop("LOG_LEVEL")
    if server_log_level is not None:
        os.environ["LOG_LEVEL"] = server_log_level
    workers = common.Workers(groups=(args.worker_concurrency,))
    sampler = Sampler(common.dsn(), dbname)
    status = 0
    try:
        common.wait_until(lambda: answers(f"{base}/healthz"), 60)
        import psutil

        load: list[subprocess.Popen[bytes]] = []

        def web_pids() -> list[int]:
            try:
                return [web.pid, *(c.pid for c in psutil.Process(web.pid).children())]
            except psutil.Error:
                return []

        cpu = common.CpuMeter(
            {
                "web": web_pids,
                "workers": workers.pids,
                "postgres": lambda: common.postgres_backends(dbname),
                "locust": lambda: [p.pid for p in load if p.poll() is None],
            }
        )
        sampler.on_sample = cpu.sample
        sampler.start()
        workers.start()
        if args.worker_nice:
            renice(workers, args.worker_nice)
        started = time.time()
        before = uptime()
        locust = [
            str(Path(sys.executable).parent / "locust"),
            "-f", str(common.ROOT / "bench" / "locustfile_load.py"),
            "--headless", "--only-summary", "--loglevel", "WARNING",
            "--host", base,
            "--users", str(args.users_submit + args.operators),
            "--spawn-rate", str(args.spawn_rate),
            "--run-time", f"{args.duration}s",
            "--stop-timeout", "10",
        ]  # fmt: skip
        locust_env = {
            **env,
            "LOAD_FIXTURE": str(fixture_path),
            "LOAD_RESULTS": str(results_path),
            "LOAD_SUBMITTERS": str(args.users_submit),
            "LOAD_OPERATORS": str(args.operators),
            "LOAD_REPEAT_SHARE": str(args.repeat_share),
        }
        locust_log = var / "locust.log"
        with locust_log.open("wb") as log:
            load.append(
                subprocess.Popen(locust, cwd=common.ROOT, env=locust_env, stdout=log, stderr=log)
            )
            load[0].wait()
        after = uptime()
        elapsed = time.time() - started
        time.sleep(1.5)  # one more sample after the end
    finally:
        samples = sampler.stop() if sampler.is_alive() else sampler.samples
        workers.stop()
        if web.poll() is None:
            os.killpg(web.pid, 15)
            try:
                web.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(web.pid, 9)
        web_log.close()

    cpu_seconds = cpu.between(started, started + elapsed)
    server_ms = access_times(var / "gunicorn.log")
    if not results_path.exists():
        print(f"locust wrote no results: see {locust_log}", file=sys.stderr)
        return 1
    results = json.loads(results_path.read_text())
    everything = figures(results["records"])
    spawned = (results["spawned"] or [started])[0]
    steady_from = spawned + args.warmup
    steady = {
        name: [e for e in entries if e[3] >= steady_from]
        for name, entries in results["records"].items()
    }
    rows = figures({name: entries for name, entries in steady.items() if entries})
    steady_seconds = started + elapsed - steady_from
    width = max(len(r["endpoint"]) for r in rows)
    print(
        f"\nsteady state: the last {steady_seconds:.0f}s of {elapsed:.0f}s (from {args.warmup:.0f}s"
        f" after every user had started); the whole run's totals and p95s follow the table"
    )
    print(
        f"{args.users_submit} submitters, {args.operators} operators, {elapsed:.0f}s;"
        f" gunicorn {args.gunicorn_workers or 'config'} workers"
        f" x {args.gunicorn_threads or 'config'} threads; celery worker"
        f" -c {args.worker_concurrency}"
        + (f" at nice {args.worker_nice}" if args.worker_nice else "")
    )
    print(f"{'endpoint':<{width}}  requests  failures  5xx  429  p50 ms  p95 ms  p99 ms  max ms")
    for r in rows:
        print(
            f"{r['endpoint']:<{width}}  {r['requests']:8d}  {r['failures']:8d}  {r['5xx']:3d}"
            f"  {r['429']:3d}  {r['p50']:6.0f}  {r['p95']:6.0f}  {r['p99']:6.0f}  {r['max']:6.0f}"
        )
    steady_total = sum(r["requests"] for r in rows)
    print(f"steady state: {steady_total:,} requests ({steady_total / steady_seconds:.1f}/s)")
    total = sum(r["requests"] for r in everything)
    five = sum(r["5xx"] for r in everything)
    throttled = sum(r["429"] for r in everything)
    failures = sum(r["failures"] for r in everything)
    print(
        f"whole run: {total:,} requests ({total / elapsed:.1f}/s): {five} 5xx, {throttled} 429"
        f" (throttled, deliberate), {failures} failures other than 429"
    )
    for name, messages in sorted(results["errors"].items()):
        for message, count in sorted(messages.items()):
            print(f"  failed: {name}: {count} x {message}")
    during = [s for s in samples if s["queued_batches"] > 0] or samples
    conns = {}
    for key in ("web", "workers", "all", "active"):
        values = [s[key] for s in during] or [0]
        conns[key] = {"max": max(values), "mean": round(statistics.fmean(values), 1)}
    print(
        "database connections (max / mean): web {web[max]} / {web[mean]}, workers"
        " {workers[max]} / {workers[mean]}, all {all[max]} / {all[mean]}, active (not idle)"
        " {active[max]} / {active[mean]}".format(**conns)
    )
    if samples:
        first, last = samples[0], samples[-1]
        drained = first["queued_batches"] - last["queued_batches"]
        span = max(last["t"] - first["t"], 1e-9)
        series = " ".join(
            f"{s['t']:.0f}s:{s['queued_batches']}" for s in samples[:: max(1, len(samples) // 8)]
        )
        print(
            f"queued map batches: {first['queued_batches']:,} -> {last['queued_batches']:,}"
            f" ({drained / span:.1f} batches/s drained; {series})"
        )
        if last["queued_batches"] == 0:
            print("note: the backlog ran out before the load ended (raise --backlog-runs)")
    if cpu_seconds:
        span = cpu_seconds.pop("seconds", elapsed)
        busy = cpu_seconds.pop("machine_busy", 0.0)
        shares = ", ".join(f"{k} {v / span:.2f}" for k, v in sorted(cpu_seconds.items()))
        print(
            f"CPU (cores used on average): {shares}; the machine {busy * 100:.0f}% busy"
            f" (every process's, other sessions' too)"
        )
    print("server time (gunicorn's, from taking the request to its last byte; ms):")
    for name, ms in sorted(server_ms.items()):
        ms.sort()
        print(
            f"  {name:<{width}}  {len(ms):8d}  p50 {percentile(ms, 50):6.0f}"
            f"  p95 {percentile(ms, 95):6.0f}  p99 {percentile(ms, 99):6.0f}"
        )
    print(f"machine before: {before}\nmachine after:  {after}")
    budget = {}
    for name in ("GET /reconciliation/", "POST /api/runs/"):
        for label, table in (("steady state", rows), ("whole run", everything)):
            row = next((r for r in table if r["endpoint"] == name), None)
            if row:
                budget[f"{name}, {label}"] = row["p95"]
                verdict = "under" if row["p95"] < BUDGET_MS else "OVER"
                print(f"p95 {name} ({label}): {row['p95']:.0f} ms, {verdict} {BUDGET_MS:.0f} ms")
    print(
        json.dumps(
            {
                "endpoints": rows,
                "whole_run": everything,
                "5xx": five,
                "429": throttled,
                "failures": failures,
                "errors": results["errors"],
                "connections": conns,
                "cpu": cpu_seconds,
                "server_ms": {
                    k: {"n": len(v), "p50": percentile(v, 50), "p95": percentile(v, 95)}
                    for k, v in server_ms.items()
                },
                "samples": samples,
                "uptime": after,
                "budget_p95": budget,
            },
            default=float,
        )
    )
    if five or failures:
        status = 1
        print(f"FAILED: {five} server errors, {failures} failures; see {var}", file=sys.stderr)
    return status


if __name__ == "__main__":
    random.seed()
    sys.exit(main())
