"""Backlog benchmark and soak (docs/performance.md): operator actions while thousands of map
batches drain on two worker processes. Prints figures; exits 1 if a target is missed or
a record or effect was duplicated or lost.

    scripts/stack.py run .venv/bin/python bench/backlog.py            # full size
    scripts/stack.py run .venv/bin/python bench/backlog.py --records 3000 --failed 40 \\
        --claims 40 --min-queued 200                                   # a small try

A database of its own (`durable_runs_backlog`, dropped and created again), a step queue
of its own, two worker groups of one prefork process each (`celery worker -c 1`: one of
them is SIGKILLed once and restarted) and a `celery beat` with the production defaults
(RUNS_LEASE_SECONDS 60, RUNS_SWEEP_INTERVAL 15, RUNS_REPUBLISH_AFTER_SECONDS 60, the
sweeper's back-off on, RUNS_BATCH_RESUME_INTERVAL 30).

Prepared before the workers start: `--failed` runs of `bench-flaky` that failed (their
step raised in this process), `--claims` `merge-change` runs whose attempt died inside
its guarded effect (one unresolved claim each, made by the sweeper). Then `--runs`
`migrate-records` runs of `--records` records (batches of the workflow's default 50)
are submitted; once at least `--min-queued` map-batch steps are queued, at staggered
times: a bulk cancel of the last `--cancel` migrate runs, a bulk retry of the failed
runs, a pause of the `migrate` step then its resume, the claims' decisions (half
"succeeded", half "failed", each with a reference, through reconciliation.services as
the form does) and one SIGKILL of a worker group (restarted a second later).

About once a second, in one REPEATABLE READ snapshot: what the workers page reads
(runs.web.workers.workers_page: steps waiting, oldest wait, the queues' depths from the
broker), what /metrics reads (runs.ops.metrics.DatabaseCollector) and the truth by this
script's own SQL: the steps waiting for a worker (queued, or retrying and due, of runs
where they may start; a paused step counts: it waits, and the pause has its own gauge)
and since when (queued_at; a due retry: next_attempt_at); plus the attempts running and
the broker's unacknowledged messages (Redis's `unacked` hash: taken by a worker, not
acknowledged yet: the in-flight messages).

Targets (exit 1 if one is missed):
- the bulk cancel, requested while at least 2,000 steps are queued (full size), starts
  within 5 s of its request and finishes within 5 s per message of 100 runs it needs (its
  own size, not the backlog's);
- the step queue never holds more than 1.1 x the messages that may be there: the queued
  steps and a stopped run's withdrawn ones (their messages stay until a worker reaches
  each, a no-op), plus the in-flight messages; above that is a duplicate (the count
  against the queued steps alone is printed too);
- the workers page's oldest wait is within 10 % of the truth (samples whose true wait is
  at least 1 s) and the page and /metrics count exactly the truth's queued steps;
- no step of a finished run is counted as queued by the page or /metrics;
- every record of every migrate run that succeeded migrated exactly once, none of a
  cancelled one twice; no step has two succeeded attempts; no merge happened twice;
  every run settles as expected; `manage.py verify_history` is clean.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

DBNAME = "durable_runs_backlog"


def _own_database_url() -> None:
    """DATABASE_URL names this bench's own database (created in main())."""
    url = os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit(
            "bench/backlog.py needs DATABASE_URL and CELERY_BROKER_URL: run it through "
            "`scripts/stack.py run` (embedded servers) or set them"
        )
    parts = urlsplit(url)
    os.environ["DATABASE_URL"] = urlunsplit(parts._replace(path=f"/{DBNAME}"))


_own_database_url()
# Production's timings, whatever the calling shell says.
for _name in (
    "RUNS_LEASE_SECONDS",
    "RUNS_SWEEP_INTERVAL",
    "RUNS_REPUBLISH_AFTER_SECONDS",
    "RUNS_REPUBLISH_BACKOFF",
    "RUNS_PROBE_GRACE_SECONDS",
    "RUNS_BATCH_RESUME_INTERVAL",
    "RUNS_BATCH_STALL_SECONDS",
    "RUNS_RESUME_RATE",
    "RUNS_FAULTS",
    "RUNS_ALLOW_FAULTS",
):
    os.environ.pop(_name, None)

import common  # noqa: E402  (bench/: sets Django up on DATABASE_URL)

logging.disable(logging.WARNING)  # this process's engine logs (the setup's failures) bury the table
import psycopg  # noqa: E402
import redis  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from django.http import QueryDict  # noqa: E402

from reconciliation import services as reconciliation  # noqa: E402
from runs import engine  # noqa: E402
from runs.batches import service as batches  # noqa: E402
from runs.engine import tools  # noqa: E402
from runs.models import Attempt, Batch, Claim, PauseChange, Run, Step  # noqa: E402
from runs.ops.metrics import DatabaseCollector  # noqa: E402
from runs.states import RUN_ACTIVE, RUN_FINISHED, ClaimStatus, RunStatus, StepStatus  # noqa: E402
from runs.tools.processes import (  # noqa: E402
    BEAT_READY,
    WORKER_READY,
    ChildProcess,
    celery_beat_args,
    celery_worker_args,
    stop_all,
)
from runs.web.workers import workers_page  # noqa: E402

ACTIVE = [str(s) for s in RUN_ACTIVE]
FINISHED = [str(s) for s in RUN_FINISHED]

TRUTH = """
WITH w AS (
  SELECT s.status,
         CASE WHEN s.compensates = '' THEN r.status = ANY(%(active)s)
              ELSE r.status = 'compensating' END AS startable,
         CASE WHEN s.status = 'queued' THEN s.queued_at ELSE s.next_attempt_at END AS ready_at,
         -- held by a pause: waiting for a person, not a worker (the page counts it
         -- apart and neither oldest wait includes it; the gauge's count does)
         EXISTS (SELECT 1 FROM runs_pause p
                 WHERE p.workflow = r.workflow AND p.step IN ('', s.name)) AS held
  FROM runs_step s JOIN runs_run r ON r.id = s.run_id
  WHERE s.status IN ('queued', 'retrying')
     -- a stopped run's map batches withdrawn to pending (state/stopped.py): created
     -- queued, their messages may still be in the broker
     OR (s.status = 'pending' AND s.parent_id IS NOT NULL)
)
SELECT clock_timestamp(),
       count(*) FILTER (WHERE startable AND status = 'queued'),
       count(*) FILTER (WHERE startable AND status = 'retrying'
                              AND ready_at <= clock_timestamp()),
       min(ready_at) FILTER (WHERE startable AND NOT held
                               AND (status = 'queued' OR ready_at <= clock_timestamp())),
       count(*) FILTER (WHERE NOT startable AND status IN ('queued', 'pending')),
       (SELECT count(*) FROM runs_attempt WHERE status = 'running'),
       count(*) FILTER (WHERE startable AND held AND status = 'queued')
FROM w
"""


def say(text: str) -> None:
    print(f"[backlog {time.strftime('%H:%M:%S')}] {text}", flush=True)


# --- the stack -------------------------------------------------------------------------
@dataclass
class Stack:
    base: Path
    groups: dict[str, ChildProcess] = field(default_factory=dict)
    beat: ChildProcess | None = None
    starts: int = 0

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(PYTHONUNBUFFERED="1", LOG_FORMAT="plain")
        return env

    def start_group(self, name: str) -> ChildProcess:
        self.starts += 1
        proc = ChildProcess(
            f"{name}#{self.starts}",
            celery_worker_args(f"{name}-{self.starts}@%h", ("-P", "prefork", "-c", "1")),
            self.env(),
            self.base / f"{name}-{self.starts}.log",
        )
        self.groups[name] = proc
        return proc

    def start_beat(self) -> None:
        self.beat = ChildProcess(
            "beat",
            celery_beat_args(self.base / "beat-schedule"),
            self.env(),
            self.base / "beat.log",
        )

    def all(self) -> list[ChildProcess]:
        return [*self.groups.values(), *([self.beat] if self.beat else [])]


def group_pids(proc: ChildProcess) -> set[int]:
    pgid, pids = proc.popen.pid, set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid:
                pids.add(int(entry.name))
    return pids


# --- preparing the operator actions' subjects ------------------------------------------
def failed_runs(count: int) -> list[str]:
    """`count` bench-flaky runs whose step failed for good, executed in this process."""
    from bench.workflows import BENCH_FAIL

    os.environ[BENCH_FAIL] = "1"
    try:
        ids = []
        for n in range(count):
            run = engine.submit_run(workflow="bench-flaky", input={"n": n})
            step = Step.objects.get(run=run)
            engine.execute_step(step_id=step.id, worker="bench-setup")
            ids.append(str(run.id))
    finally:
        os.environ.pop(BENCH_FAIL)
    failed = Run.objects.filter(pk__in=ids, status=RunStatus.FAILED).count()
    assert failed == count, f"{failed} of {count} flaky runs failed"
    return ids


def unresolved_claims(count: int) -> list[int]:
    """`count` merge-change runs whose attempt died inside its guarded effect: the
    sweeper makes each claim unresolved (merge-change has no probe)."""
    runs = [
        engine.submit_run(workflow="merge-change", input={"change_id": 100_000 + n})
        for n in range(count)
    ]
    for n, run in enumerate(runs):
        step = Step.objects.get(run=run, status=StepStatus.QUEUED)
        started = tools.start_attempt(step_id=step.id, worker=f"bench-setup:{n}")
        assert started is not None
        tools.renew_lease(started.attempt.id, started.lease_seconds, entering_effect=True)
    with connection.cursor() as cursor:  # the worker died a lease ago
        cursor.execute(
            "UPDATE runs_attempt SET lease_expires_at = now() - interval '1 second'"
            " WHERE status = 'running'"
        )
    while len(engine.sweep(limit=count).crashed):
        pass
    claims = list(
        Claim.objects.filter(run__in=runs, status=ClaimStatus.UNRESOLVED)
        .order_by("id")
        .values_list("id", flat=True)
    )
    assert len(claims) == count, f"{len(claims)} of {count} claims unresolved"
    return claims


# --- sampling ----------------------------------------------------------------------------
@dataclass
class Sample:
    t: float  # seconds since the backlog was ready
    step_messages: int | None
    control_messages: int | None
    unacked: int
    running: int
    queued: int  # truth
    retrying_due: int  # truth
    held: int  # truth: queued steps held by a pause
    finished_queued: int  # finished runs' steps queued, or withdrawn with a message out
    oldest_truth: float | None
    page_waiting: int
    page_oldest: float | None
    metric_queued: int
    metric_oldest: float


def sample(t0: float, broker: Any) -> Sample:
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            page = workers_page()
            gauges = {
                m.name: m.samples[0].value
                for m in DatabaseCollector().collect()
                if m.name.endswith(("queued_steps", "queued_step_age_seconds"))
            }
            cursor.execute(TRUTH, {"active": ACTIVE})
            now, queued, due, ready_at, finished_queued, running, held = cursor.fetchone()
    unacked = int(broker.hlen("unacked"))
    depths = {q.name: q.messages for q in page.queues}
    oldest = page.oldest_wait
    return Sample(
        t=time.monotonic() - t0,
        step_messages=depths.get(settings.CELERY_TASK_DEFAULT_QUEUE),
        control_messages=depths.get(settings.CELERY_RECOVERY_QUEUE),
        unacked=unacked,
        running=int(running),
        queued=int(queued),
        retrying_due=int(due),
        held=int(held),
        finished_queued=int(finished_queued),
        oldest_truth=(now - ready_at).total_seconds() if ready_at else None,
        page_waiting=page.waiting,
        page_oldest=oldest.total_seconds() if oldest is not None else None,
        metric_queued=int(gauges["durable_runs_queued_steps"]),
        metric_oldest=float(gauges["durable_runs_oldest_queued_step_age_seconds"]),
    )


def broker_ok(s: Sample) -> bool:
    return s.step_messages is not None and s.step_messages <= 1.1 * s.queued + s.unacked


def wait_error(s: Sample, shown: float | None) -> float | None:
    """Relative error of a shown oldest wait against the truth (true wait of 1 s or more)."""
    if s.oldest_truth is None or s.oldest_truth < 1.0:
        return None
    return abs((shown or 0.0) - s.oldest_truth) / s.oldest_truth


# --- the actions -------------------------------------------------------------------------
@dataclass
class Action:
    name: str
    at: float  # seconds after the backlog is ready
    requested: float | None = None  # monotonic
    figures: dict[str, Any] = field(default_factory=dict)


def db_seconds(a: datetime | None, b: datetime | None) -> float | None:
    return None if a is None or b is None else (b - a).total_seconds()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="migrate-records runs")
    parser.add_argument("--records", type=int, default=24_000, help="records per run")
    parser.add_argument("--cancel", type=int, default=2, help="migrate runs to bulk-cancel")
    parser.add_argument("--failed", type=int, default=300, help="failed runs to bulk-retry")
    parser.add_argument("--claims", type=int, default=300, help="unresolved claims to decide")
    parser.add_argument(
        "--min-queued", type=int, default=2000, help="queued steps before the actions begin"
    )
    parser.add_argument("--gap", type=float, default=10.0, help="seconds between actions")
    parser.add_argument("--pause-for", type=float, default=10.0, help="seconds paused")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds to drain")
    parser.add_argument("--no-verify", action="store_true", help="skip verify_history")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    with psycopg.connect(common.dsn("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{DBNAME}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{DBNAME}"')
    call_command("migrate", verbosity=0)
    base = Path(tempfile.mkdtemp(prefix="durable-runs-backlog-"))
    stack = Stack(base)
    broker = redis.Redis.from_url(common.redis_url(settings.CELERY_BROKER_URL))
    say(f"database {DBNAME}, queue {common.QUEUE}, logs in {base}")
    try:
        return soak(args, stack, broker)
    finally:
        stop_all(stack.all())
        connection.close()


def soak(args: argparse.Namespace, stack: Stack, broker: Any) -> int:
    from config.celery import app

    operator = User.objects.get_or_create(username="bench-operator")[0]
    say(f"preparing {args.failed} failed runs and {args.claims} unresolved claims")
    flaky = failed_runs(args.failed)
    claims = unresolved_claims(args.claims)
    app.control.purge()  # the setup's messages: their steps ran (or died) in this process

    stack.start_beat()
    for name in ("A", "B"):
        stack.start_group(name)
    for proc in stack.groups.values():
        proc.wait_ready(WORKER_READY)
    assert stack.beat is not None
    stack.beat.wait_ready(BEAT_READY)

    say(f"submitting {args.runs} migrate-records runs of {args.records:,} records")
    migrate: list[str] = []
    cancel_from = ""
    for n in range(args.runs):
        if n == args.runs - args.cancel:
            with connection.cursor() as cursor:
                cursor.execute("SELECT now()")
                cancel_from = cursor.fetchone()[0].isoformat()
            time.sleep(0.01)
        run = engine.submit_run(workflow="migrate-records", input={"count": args.records})
        migrate.append(str(run.id))
    batches_per_run = -(-args.records // 50)
    expected_steps = args.runs * batches_per_run
    started_wait = time.monotonic()
    while True:
        expanded = Step.objects.filter(run_id__in=migrate, key__startswith="migrate[").count()
        queued = Step.objects.filter(
            run_id__in=migrate, key__startswith="migrate[", status=StepStatus.QUEUED
        ).count()
        if expanded == expected_steps and queued >= args.min_queued:
            break
        if expanded == expected_steps or time.monotonic() - started_wait > 600:
            say(f"only {queued} map-batch steps queued (of {expanded}); go on")
            break
        time.sleep(0.5)
    say(f"backlog ready: {queued} map-batch steps queued; the actions begin")

    t0 = time.monotonic()
    gap = args.gap
    plan = [
        Action("bulk cancel", 0.0),
        Action("bulk retry", gap),
        Action("pause", 2 * gap),
        Action("resume", 2 * gap + args.pause_for),
        Action("claim decisions", 3 * gap + args.pause_for),
        Action("SIGKILL a worker group", 4 * gap + args.pause_for),
    ]
    acts = {a.name: a for a in plan}
    samples: list[Sample] = []
    pending = list(plan)
    cancel_batch = retry_batch = None
    pause_row = None
    decisions: list[tuple[int, float, str]] = []  # claim, seconds the call took, outcome
    undecided = list(claims)
    killed: list[int] = []
    kill_repaired: float | None = None
    restarted_ready: float | None = None
    pause_drained: float | None = None
    resume_first: float | None = None
    next_sample = 0.0
    end = t0 + args.timeout

    def all_settled() -> bool:
        return (
            not Run.objects.filter(status__in=ACTIVE).exists()
            and not Batch.objects.filter(status__in=["pending", "running"]).exists()
        )

    while time.monotonic() < end:
        now = time.monotonic() - t0
        # Supervise: a worker group that died by itself is restarted, as make up does.
        for name, proc in list(stack.groups.items()):
            if proc.popen.poll() is not None and not killed:
                say(f"worker group {name} exited by itself; restarting")
                stack.start_group(name)
        while pending and pending[0].at <= now:
            action = pending.pop(0)
            action.requested = time.monotonic()
            if action.name == "bulk cancel":
                action.figures["queued_at_request"] = samples[-1].queued if samples else queued
                params = QueryDict(mutable=True)
                params.update({"workflow": "migrate-records", "created_after": cancel_from})
                cancel_batch = batches.create_batch(
                    operation="cancel", params=params, actor=operator, reason="bench: stop some"
                )
                say(f"bulk cancel: batch {cancel_batch.id} of {cancel_batch.total} run(s)")
            elif action.name == "bulk retry":
                params = QueryDict(mutable=True)
                params.update({"workflow": "bench-flaky", "status": "failed"})
                retry_batch = batches.create_batch(
                    operation="retry", params=params, actor=operator, reason="bench: retry them"
                )
                say(f"bulk retry: batch {retry_batch.id} of {retry_batch.total} run(s)")
            elif action.name == "pause":
                pause_row = engine.pause(
                    workflow="migrate-records", step="migrate", actor=operator, reason="bench"
                )
                action.figures["call_s"] = time.monotonic() - action.requested
                say("paused migrate-records step migrate")
            elif action.name == "resume":
                assert pause_row is not None
                resumed = engine.resume(pause_id=pause_row.id, actor=operator, reason="bench")
                action.figures["call_s"] = time.monotonic() - action.requested
                action.figures["republished"] = len(resumed.republished)
                action.figures["db_requested"] = PauseChange.objects.get(pk=resumed.change.pk).at
                say(f"resumed: {len(resumed.republished)} step(s) republished")
            elif action.name == "SIGKILL a worker group":
                proc = stack.groups["B"]
                pids = group_pids(proc)
                killed = [
                    a.id
                    for a in Attempt.objects.filter(status="running").only("id", "worker")
                    if a.worker.rsplit(":", 1)[-1].isdigit()
                    and int(a.worker.rsplit(":", 1)[-1]) in pids
                ]
                proc.signal(signal.SIGKILL)
                proc.wait_exit(30)
                say(f"SIGKILL worker group B: {len(killed)} attempt(s) in flight")
                time.sleep(1)
                stack.start_group("B").wait_ready(WORKER_READY)
                restarted_ready = time.monotonic()
        # The decisions: some per loop turn, as operators click through the queue.
        if acts["claim decisions"].requested is not None and undecided:
            for claim_id in undecided[:25]:
                outcome = "succeeded" if claim_id % 2 else "failed"
                began = time.monotonic()
                reconciliation.resolve(
                    claim_id=claim_id,
                    user=operator,
                    outcome=outcome,
                    note=f"bench: checked the code host ({outcome})",
                    reference=f"https://codehost.example/changes/{claim_id}",
                )
                decisions.append((claim_id, time.monotonic() - began, outcome))
            undecided = undecided[25:]
            if not undecided:
                acts["claim decisions"].figures["all_decided"] = time.monotonic()
        # What the pause and the kill are waiting for.
        if pause_row is not None and pause_drained is None and acts["resume"].requested is None:
            if not Attempt.objects.filter(
                status="running", step__name="migrate", run__workflow="migrate-records"
            ).exists():
                pause_drained = time.monotonic()
        if acts["resume"].requested is not None and resume_first is None:
            requested_db = acts["resume"].figures["db_requested"]
            if Attempt.objects.filter(
                step__name="migrate", run__workflow="migrate-records", started_at__gt=requested_db
            ).exists():
                resume_first = time.monotonic()
        if killed and kill_repaired is None:
            if not Attempt.objects.filter(pk__in=killed, status="running").exists():
                kill_repaired = time.monotonic()
        if time.monotonic() - t0 >= next_sample:
            s = sample(t0, broker)
            samples.append(s)
            next_sample = s.t + 1.0
            if len(samples) % 15 == 1:
                say(
                    f"t={s.t:5.0f}s queued {s.queued} (page {s.page_waiting}, metric "
                    f"{s.metric_queued}), step queue {s.step_messages}, unacked {s.unacked}, "
                    f"running {s.running}, oldest {s.oldest_truth or 0:.1f}s "
                    f"(page {s.page_oldest or 0:.1f}s)"
                )
        if not pending and not undecided and (not killed or kill_repaired) and all_settled():
            break
        time.sleep(0.2)
    drained = time.monotonic() - t0
    settled = all_settled()
    samples.append(sample(t0, broker))
    say(f"drained after {drained:.0f} s" if settled else "TIMED OUT before everything settled")

    # --- figures -----------------------------------------------------------------------
    rows: list[tuple[str, str, str, str]] = []  # action, size, request->start, start->finish
    ok = settled
    failures: list[str] = []

    def fmt(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f} s"

    cancel_ok = False
    for batch, name in ((cancel_batch, "bulk cancel"), (retry_batch, "bulk retry")):
        if batch is None:
            continue
        batch.refresh_from_db()
        start = db_seconds(batch.created_at, batch.started_at)
        run_s = db_seconds(batch.started_at, batch.finished_at)
        size = f"{batch.total} runs ({batch.applied} applied, {batch.refused} refused)"
        if name == "bulk cancel":
            steps_cancelled = Step.objects.filter(
                run_id__in=migrate[args.runs - args.cancel :],
                key__startswith="migrate[",
                status=StepStatus.QUEUED,
            ).count()
            size += (
                f", {steps_cancelled} of their steps left queued; requested with "
                f"{acts['bulk cancel'].figures['queued_at_request']} steps queued"
            )
            chunks = -(-batch.total // batches.CHUNK)
            cancel_ok = (
                start is not None
                and start <= 5.0
                and run_s is not None
                and run_s <= 5.0 * chunks
                and acts["bulk cancel"].figures["queued_at_request"] >= args.min_queued
            )
            if not cancel_ok:
                failures.append(
                    f"bulk cancel: start {fmt(start)} (target 5 s), run {fmt(run_s)} (target "
                    f"{5.0 * chunks:.0f} s), queued at request "
                    f"{acts['bulk cancel'].figures['queued_at_request']}"
                )
        else:
            retried = Run.objects.filter(pk__in=flaky)
            last = retried.order_by("-finished_at").values_list("finished_at", flat=True).first()
            size += (
                f"; runs succeeded {retried.filter(status=RunStatus.SUCCEEDED).count()}"
                f", the last {fmt(db_seconds(batch.finished_at, last))} after the batch"
            )
        rows.append((name, size, fmt(start), fmt(run_s)))

    pa = acts["pause"]
    if pa.requested is not None:
        rows.append(
            (
                "pause (migrate step)",
                "1 pause row",
                fmt(pa.figures.get("call_s")),
                fmt(None if pause_drained is None else pause_drained - pa.requested)
                + " (until no migrate attempt ran)",
            )
        )
    ra = acts["resume"]
    if ra.requested is not None:
        rows.append(
            (
                "resume",
                f"{ra.figures['republished']} steps republished",
                fmt(ra.figures["call_s"]),
                fmt(None if resume_first is None else resume_first - ra.requested)
                + " (to the first held step's start)",
            )
        )
    ca = acts["claim decisions"]
    if decisions and ca.requested is not None:
        call = [d for _, d, _ in decisions]
        resolved = Claim.objects.filter(pk__in=claims)
        gaps = sorted(
            (r.run.finished_at - r.resolved_at).total_seconds()
            for r in resolved.select_related("run")
            if r.run.finished_at and r.resolved_at
        )
        rows.append(
            (
                "claim decisions",
                f"{len(decisions)} decisions",
                f"median {statistics.median(call) * 1000:.0f} ms, max {max(call) * 1000:.0f} ms"
                " per call",
                f"all {fmt(ca.figures.get('all_decided', time.monotonic()) - ca.requested)};"
                " run finished after decision median"
                f" {fmt(statistics.median(gaps) if gaps else None)}"
                f", max {fmt(gaps[-1] if gaps else None)}",
            )
        )
    ka = acts["SIGKILL a worker group"]
    if ka.requested is not None:
        rows.append(
            (
                "SIGKILL worker group B",
                f"{len(killed)} attempts in flight",
                fmt(None if restarted_ready is None else restarted_ready - ka.requested)
                + " (restarted, ready)",
                fmt(None if kill_repaired is None else kill_repaired - ka.requested)
                + " (its attempts taken over; lease 60 s)",
            )
        )

    # The time series.
    broker_bad = [s for s in samples if not broker_ok(s)]
    ratios = [
        (s.step_messages or 0) / (s.queued + s.unacked)
        for s in samples
        if s.queued + s.unacked > 0 and s.step_messages is not None
    ]
    # The same bound with the finished runs' queued steps counted as if queued: their
    # messages stay in the broker until a worker reaches them (each a no-op then), so
    # what remains above this is a duplicate (a republish of a message still there).
    beyond_leftovers = [
        s
        for s in samples
        if s.step_messages is not None
        and s.step_messages > 1.1 * (s.queued + s.finished_queued) + s.unacked
    ]
    resumed_at = (
        acts["resume"].requested - t0 if acts["resume"].requested is not None else float("inf")
    )
    before_resume = [s for s in broker_bad if s.t < resumed_at]
    republished = 0
    for log in stack.base.glob("*.log"):
        for line in log.read_text(errors="replace").splitlines():
            if "recovery sweep:" in line and " republished step(s)" in line:
                words = line.split("recovery sweep:", 1)[1].split(",")
                republished += int(words[1].split()[0])
    page_err = [e for s in samples if (e := wait_error(s, s.page_oldest)) is not None]
    metric_err = [e for s in samples if (e := wait_error(s, s.metric_oldest)) is not None]
    count_off = [
        s
        for s in samples
        if s.page_waiting != s.queued + s.retrying_due - s.held
        or s.metric_queued != s.queued + s.retrying_due
    ]
    finished_counted = [
        s for s in samples if max(s.page_waiting, s.metric_queued) > s.queued + s.retrying_due
    ]
    due_seen = max((s.retrying_due for s in samples), default=0)
    if broker_bad:
        # Reported, not a failure: after a cancel its runs' withdrawn steps keep their
        # messages until a worker reaches each (a FIFO broker deletes none from the
        # middle); the target counts them (docs/performance.md#a-backlog).
        worst = max(broker_bad, key=lambda s: (s.step_messages or 0) - 1.1 * s.queued - s.unacked)
        print(
            f"note: {len(broker_bad)} of {len(samples)} samples above 1.1 x queued + in-flight"
            f" alone; worst at t={worst.t:.0f}s: {worst.step_messages} messages, {worst.queued}"
            f" queued, {worst.unacked} in flight, {worst.finished_queued} withdrawn or queued"
            " steps of finished runs, their messages still there"
        )
    if beyond_leftovers:
        failures.append(
            f"broker: {len(beyond_leftovers)} samples above 1.1 x (queued + finished runs' "
            "withdrawn or queued steps) + in-flight: duplicates"
        )
    if page_err and max(page_err) > 0.10:
        failures.append(f"workers page oldest wait off by up to {max(page_err):.1%}")
    if count_off:
        failures.append(f"page or metric count differs from the truth in {len(count_off)} samples")
    if finished_counted:
        failures.append(f"a finished run's step counted in {len(finished_counted)} samples")

    # --- the checks ----------------------------------------------------------------------
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM (SELECT 1 FROM examples_targetrecord"
            " GROUP BY run_id, record_id HAVING count(*) > 1) d"
        )
        dup_records = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*) FROM runs_run r WHERE r.workflow = 'migrate-records'"
            " AND r.status = 'succeeded' AND (SELECT count(DISTINCT record_id)"
            " FROM examples_targetrecord t WHERE t.run_id = r.id) <> %s",
            [args.records],
        )
        lost_records = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*) FROM (SELECT 1 FROM runs_attempt WHERE status = 'succeeded'"
            " GROUP BY step_id HAVING count(*) > 1) d"
        )
        dup_attempts = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*) FROM (SELECT 1 FROM examples_merge GROUP BY run_id"
            " HAVING count(*) > 1) d"
        )
        dup_merges = cursor.fetchone()[0]
        cursor.execute(
            "SELECT count(*) FROM runs_claim c WHERE c.id = ANY(%s) AND c.status = 'failed'"
            " AND NOT EXISTS (SELECT 1 FROM examples_merge m WHERE m.run_id = c.run_id)",
            [claims],
        )
        lost_merges = cursor.fetchone()[0]
    by_status: dict[str, dict[str, int]] = {}
    for wf, status, n in _by_status():
        by_status.setdefault(wf, {})[status] = n
    expected = {
        "migrate-records": {
            "succeeded": args.runs - args.cancel,
            "cancelled": args.cancel,
        },
        "bench-flaky": {"succeeded": args.failed},
        "merge-change": {"succeeded": args.claims},
    }
    mismatched = {
        wf: by_status.get(wf) for wf, want in expected.items() if by_status.get(wf) != want
    }
    verify = "skipped"
    if not args.no_verify:
        out = subprocess.run(
            [sys.executable, "manage.py", "verify_history"],
            cwd=common.ROOT,
            env=dict(os.environ),
            capture_output=True,
            text=True,
            check=False,
        )
        verify = (out.stdout.strip().splitlines() or ["(no output)"])[-1]
        if out.returncode != 0:
            failures.append(f"verify_history: {verify}")
    for label, n in (
        ("records migrated twice", dup_records),
        ("succeeded migrate runs missing records", lost_records),
        ("steps with two succeeded attempts", dup_attempts),
        ("runs that merged twice", dup_merges),
        ("claims decided failed whose retry merged nothing", lost_merges),
    ):
        if n:
            failures.append(f"{label}: {n}")
    if mismatched:
        failures.append(f"runs not as expected: {mismatched} (want {expected})")
    ok = ok and not failures

    # --- the report ----------------------------------------------------------------------
    load = subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    print()
    print(
        f"backlog soak: {args.runs} migrate-records x {args.records:,} records "
        f"({expected_steps:,} map-batch steps), {args.failed} failed runs, {args.claims} "
        f"claims; 2 worker processes (2 groups of -c 1), beat; production timings"
    )
    print(f"queued map-batch steps when the actions began: {queued:,}; drained in {drained:.0f} s")
    print()
    print(f"{'action':<24}{'size':<72}{'request -> start':<36}start -> finish")
    for name, size, start, fin in rows:
        print(f"{name:<24}{size:<72}{start:<36}{fin}")
    print()
    print(f"samples: {len(samples)} (about 1 s apart)")
    print(
        f"step queue / (queued + in flight): max {max(ratios, default=0):.2f}; samples above "
        f"1.1 x queued + in flight: {len(broker_bad)} ({len(before_resume)} before the resume)"
    )
    print(
        f"samples above 1.1 x (queued + finished runs' queued steps) + in flight: "
        f"{len(beyond_leftovers)}; steps the sweeper republished: {republished}"
    )
    peak = max(samples, key=lambda s: s.queued)
    print(
        f"peak: {peak.queued} queued, {peak.step_messages} step messages, {peak.unacked} in "
        f"flight, {peak.running} running; control queue max "
        f"{max((s.control_messages or 0) for s in samples)}"
    )
    print(
        f"oldest wait error: workers page max {max(page_err, default=0):.1%}, /metrics max "
        f"{max(metric_err, default=0):.1%} ({len(page_err)} samples with a true wait >= 1 s)"
    )
    print(
        f"count differs from truth: {len(count_off)} samples; a finished run's step counted: "
        f"{len(finished_counted)}; max queued steps of finished runs (not counted): "
        f"{max(s.finished_queued for s in samples)}; due retries seen: {due_seen}"
    )
    print(f"runs by status: {json.dumps(by_status)}")
    print(
        f"records migrated twice {dup_records}, missing {lost_records}; steps succeeded twice "
        f"{dup_attempts}; merges twice {dup_merges}, lost {lost_merges}; verify_history: {verify}"
    )
    print(f"uptime: {load}")
    for line in failures:
        print(f"MISSED: {line}")
    print("OK" if ok else "FAILED")
    series = stack.base / "samples.json"
    series.write_text(json.dumps([s.__dict__ for s in samples]))
    print(f"time series: {series}")
    return 0 if ok else 1


def _by_status() -> list[tuple[str, str, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT workflow, status, count(*) FROM runs_run GROUP BY 1, 2")
        return [(w, s, int(n)) for w, s, n in cursor.fetchall()]


if __name__ == "__main__":
    sys.exit(main())
