"""Chaos soak: real workers, beat and servers, faults at random moments from a
fixed seed, then the checks that matter. Prints figures; asserts nothing in the test
suite (it is not part of it), but exits 1 if an effect was duplicated or lost or the
history does not verify.

    make chaos                                   # default: seed 1, 150 s of faults
    make chaos CHAOS_ARGS="--seed 7 --duration 300"

It starts a PostgreSQL and a Redis of its own (so it may stop them) and, against them:
two worker groups (prefork, 2 processes each), a third worker whose clock runs an hour
ahead (libfaketime; skipped with a note when it is not installed), and a beat. The
workload: 20 `migrate-records` runs (500 records, batches of 50) spread over the soak,
and a stream of `charge-payment` and `merge-change-probed` runs. The faults, one at a
time: SIGKILL of a whole worker group (restarted), SIGSTOP of a group past its lease
(then SIGCONT), PostgreSQL stopped in immediate mode (restarted), Redis killed
(restarted empty); and throughout, a process of group B dies right after every 5th
merge or charge it performs (the completion not yet recorded). Recovery time: from
the moment a fault is repaired (the group restarted or continued, the server back)
until the attempts it hit are taken over or finished and the next step or item
commits.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Dev tooling: the soak reuses the test suite's private servers.
from runs.tools.processes import WORKER_READY, ChildProcess  # noqa: E402
from tests.integration.servers import (  # noqa: E402
    PrivatePostgres,
    PrivateRedis,
    new_private_postgres,
    remove_private_postgres,
)

LEASE = 3.0
TIMINGS = {
    "RUNS_LEASE_SECONDS": str(LEASE),
    "RUNS_SWEEP_INTERVAL": "1",
    "RUNS_REPUBLISH_AFTER_SECONDS": "5",
    "RUNS_PROBE_GRACE_SECONDS": "2",
    "RUNS_DB_CONNECT_TIMEOUT_SECONDS": "2",
}
FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
FAULTS = ("kill_group", "sigstop", "postgres_restart", "redis_restart")
MIGRATIONS, RECORDS, BATCH = 20, 500, 50
AFTER_EFFECT_FAULTS = "after_effect:merge:5,after_effect:charge:5"


def say(text: str) -> None:
    print(f"[chaos {time.strftime('%H:%M:%S')}] {text}", flush=True)


@dataclass
class Stack:
    base: Path
    pg: PrivatePostgres
    redis: PrivateRedis
    env: dict[str, str]
    groups: dict[str, ChildProcess] = field(default_factory=dict)
    others: list[ChildProcess] = field(default_factory=list)
    starts: int = 0
    # Worker processes that exited by themselves (not a kill of the soak's), each
    # restarted as production's supervisors do (docker compose's `restart:`, make up).
    self_exits: list[str] = field(default_factory=list)

    def supervise(self) -> None:
        """Restart a worker group that exited by itself. Celery's main process can die
        on a broker restart (kombu's Redis transport, restoring an unacknowledged
        message while the server is gone: "Unrecoverable error: AttributeError"), as
        it would in production, where a supervisor starts it again; so does the soak,
        and it reports how often."""
        for name, proc in list(self.groups.items()):
            if proc.popen.poll() is not None:
                code = proc.popen.returncode
                say(f"worker group {name} exited by itself (code {code}); restarting")
                self.self_exits.append(name)
                self.start_group(name)
        skewed = next((p for p in self.others if p.name.startswith("clock+1h")), None)
        if skewed is not None and skewed.popen.poll() is not None:
            code = skewed.popen.returncode
            say(f"the clock-skewed worker exited by itself (code {code}); restarting")
            self.self_exits.append("clock+1h")
            self.others.remove(skewed)
            self.start_clock_skewed()

    def _worker_args(self, name: str, concurrency: int) -> list[str]:
        return [
            sys.executable, "-m", "celery", "-A", "config", "worker", "-P", "prefork",
            "-c", str(concurrency), "-n", f"{name}-{self.starts}@%h", "--without-gossip",
            "--without-mingle", "--loglevel", "INFO",
        ]  # fmt: skip

    def start_group(self, name: str) -> ChildProcess:
        self.starts += 1
        env = self.env
        if name == "B":
            # Group B's processes also die right after every 5th merge or charge they
            # perform (before its completion is recorded): the uncertain case, which a
            # merge's probe must resolve and a charge's idempotency key must absorb.
            env = {**env, "RUNS_ALLOW_FAULTS": "1", "RUNS_FAULTS": AFTER_EFFECT_FAULTS}
        proc = ChildProcess(
            f"{name}#{self.starts}",
            self._worker_args(name, 2),
            env,
            self.base / f"{name}-{self.starts}.log",
        )
        self.groups[name] = proc
        return proc

    def start_clock_skewed(self) -> ChildProcess | None:
        if not FAKETIME_LIB.exists():
            say(f"no {FAKETIME_LIB}: the clock fault is skipped (apt-get install faketime)")
            return None
        env = {
            **self.env,
            "LD_PRELOAD": str(FAKETIME_LIB),
            "FAKETIME": "+1h",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
        }
        self.starts += 1
        proc = ChildProcess(
            f"clock+1h#{self.starts}",
            self._worker_args("skewed", 1),
            env,
            self.base / f"skewed-{self.starts}.log",
        )
        self.others.append(proc)
        return proc

    def start_beat(self) -> None:
        args = [
            sys.executable, "-m", "celery", "-A", "config", "beat", "--loglevel", "INFO",
            "--schedule", str(self.base / "beat-schedule"),
        ]  # fmt: skip
        self.others.append(ChildProcess("beat", args, self.env, self.base / "beat.log"))

    def all(self) -> list[ChildProcess]:
        return [*self.groups.values(), *self.others]


def make_stack(base: Path) -> Stack:
    say("starting a private PostgreSQL and Redis")
    pg_base = Path(tempfile.mkdtemp(prefix="durable-runs-chaos-pg-"))
    pg = new_private_postgres(pg_base)
    (base / "redis").mkdir()
    redis = PrivateRedis(base / "redis")
    redis.start()
    env = {
        **os.environ,
        **TIMINGS,
        "DATABASE_URL": pg.url,
        "CELERY_BROKER_URL": redis.url,
        "RUNS_QUEUE": f"durable-runs-chaos-{uuid.uuid4().hex[:6]}",
        "SECRET_KEY": os.environ.get("SECRET_KEY") or f"chaos-{uuid.uuid4().hex}",
        "LOG_FORMAT": "plain",
        "PYTHONUNBUFFERED": "1",
        "PROMETHEUS_MULTIPROC_DIR": "",
        # It runs the examples (a deployment registers no workflow unless told).
        "RUNS_WORKFLOW_MODULES": os.environ.get("RUNS_WORKFLOW_MODULES") or "examples.workflows",
    }
    env.pop("PROMETHEUS_MULTIPROC_DIR")
    env.pop("RUNS_FAULTS", None)
    say("migrating")
    subprocess.run(
        [sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )
    names = ("DATABASE_URL", "CELERY_BROKER_URL", "RUNS_QUEUE", "RUNS_WORKFLOW_MODULES")
    os.environ.update({k: env[k] for k in names})
    os.environ.update(TIMINGS)
    os.environ.setdefault("SECRET_KEY", env["SECRET_KEY"])
    return Stack(base=base, pg=pg, redis=redis, env=env)


# -- reading progress straight from PostgreSQL (works while Django's connection is down) --


def progress(stack: Stack) -> int | None:
    row = stack.pg.query(
        "SELECT (SELECT count(*) FROM runs_claim WHERE status = 'succeeded')"
        " + (SELECT count(*) FROM runs_step WHERE status = 'succeeded')"
    )
    return None if row is None else int(row[0])


def wait_progress(
    stack: Stack, since: float, keep_busy: Callable[[], None], limit: float = 120.0
) -> float | None:
    """Seconds from `since` until the next step or item commits; None if none does.
    `keep_busy` goes on submitting the workload meanwhile (no work, no progress)."""
    before = None
    while before is None and time.monotonic() - since < limit:
        keep_busy()
        stack.supervise()
        before = progress(stack)
        if before is None:
            time.sleep(0.1)
    while time.monotonic() - since < limit:
        keep_busy()
        stack.supervise()
        now = progress(stack)
        if now is not None and before is not None and now > before:
            return time.monotonic() - since
        time.sleep(0.1)
    return None


# -- workload ---------------------------------------------------------------------


class Workload:
    def __init__(
        self,
        rng: random.Random,
        duration: float,
        migrations: int = MIGRATIONS,
        records: int = RECORDS,
    ) -> None:
        self.rng, self.duration, self.records = rng, duration, records
        self.migrations_due = [duration * i / migrations for i in range(migrations)]
        self.change = 0
        self.refused = 0
        self.last_call = -1.0

    def submit_due(self, elapsed: float) -> None:
        """Submit what is due by `elapsed`: the next migrations, and at most one more
        charge or merge per call (about one a second: calls are that far apart, or
        rate-limited to that while waiting for a recovery)."""
        from runs import engine

        if elapsed - self.last_call < 0.5:
            return
        self.last_call = elapsed
        jobs: list[tuple[str, dict[str, Any]]] = []
        while self.migrations_due and self.migrations_due[0] <= elapsed:
            self.migrations_due.pop(0)
            jobs.append(("migrate-records", {"count": self.records, "batch_size": BATCH}))
        if self.rng.random() < 0.8:
            self.change += 1
            jobs.append(
                ("charge-payment", {"amount": self.rng.randint(1, 100)})
                if self.rng.random() < 0.5
                else ("merge-change-probed", {"change_id": self.change})
            )
        for workflow, data in jobs:
            try:
                engine.submit(workflow=workflow, input=data)
            except Exception as exc:
                self.refused += 1
                from django.db import connection

                connection.close()
                say(f"submission refused ({type(exc).__name__}); the client would retry")


# -- faults -----------------------------------------------------------------------


def group_pids(proc: ChildProcess) -> set[int]:
    """The processes of a worker group (its process group: main process and children)."""
    pgid = proc.popen.pid
    pids = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[2]) == pgid:  # after the name: state, ppid, pgrp
                pids.add(int(entry.name))
    return pids


def attempts_of(stack: Stack, pids: set[int]) -> list[int]:
    """Attempts running in those processes (attempt.worker is host:pid)."""
    rows = _rows(stack, "SELECT id, worker FROM runs_attempt WHERE status = 'running'")
    return [
        aid
        for aid, worker in rows
        if worker and worker.rsplit(":", 1)[-1].isdigit() and int(worker.rsplit(":", 1)[-1]) in pids
    ]


def wait_taken_over(
    stack: Stack, attempt_ids: list[int], since: float, limit: float = 120.0
) -> float | None:
    """Seconds from `since` until none of the attempts runs any more (each finished, or
    declared crashed by the sweeper and its step handed on)."""
    if not attempt_ids:
        return None
    while time.monotonic() - since < limit:
        row = stack.pg.query(
            "SELECT count(*) FROM runs_attempt WHERE status = 'running' AND id = ANY(%s)",
            (attempt_ids,),
        )
        if row is not None and row[0] == 0:
            return time.monotonic() - since
        time.sleep(0.1)
    return None


def inject(stack: Stack, kind: str, rng: random.Random) -> tuple[float, list[int]]:
    """Apply one fault and repair it; return the monotonic time of the repair and the
    attempts that were running in the processes it hit."""
    hit: list[int] = []
    if kind == "kill_group":
        name = rng.choice(sorted(stack.groups))
        hit = attempts_of(stack, group_pids(stack.groups[name]))
        say(
            f"SIGKILL worker group {name} (main process and its children), "
            f"{len(hit)} attempt(s) in flight"
        )
        stack.groups[name].signal(signal.SIGKILL)
        stack.groups[name].wait_exit(30)
        time.sleep(1)
        stack.start_group(name)
    elif kind == "sigstop":
        name = rng.choice(sorted(stack.groups))
        pause = LEASE * 2 + 1
        hit = attempts_of(stack, group_pids(stack.groups[name]))
        say(
            f"SIGSTOP worker group {name} for {pause:.0f} s (past its lease), then SIGCONT; "
            f"{len(hit)} attempt(s) in flight"
        )
        stack.groups[name].signal(signal.SIGSTOP)
        time.sleep(pause)
        stack.groups[name].signal(signal.SIGCONT)
    elif kind == "postgres_restart":
        say("PostgreSQL: stop -m immediate, start after 2 s")
        stack.pg.stop("immediate")
        time.sleep(2)
        stack.pg.start()
    elif kind == "redis_restart":
        say("Redis: SIGKILL, start after 2 s (empty: it keeps nothing on disk)")
        stack.redis.kill()
        time.sleep(2)
        stack.redis.start()
    return time.monotonic(), hit


def schedule(
    rng: random.Random,
    duration: float,
    warmup: float = 10.0,
    gap: tuple[float, float] = (12.0, 24.0),
) -> list[tuple[float, str]]:
    """Fault times: one every 12-24 s (`gap`) after a 10 s warm-up; kinds shuffled in
    rounds so that each comes up as often as the others."""
    plan: list[tuple[float, str]] = []
    at = warmup
    kinds: list[str] = []
    while True:
        at += rng.uniform(*gap)
        if at > duration - 5:
            return plan
        if not kinds:
            kinds = list(FAULTS)
            rng.shuffle(kinds)
        plan.append((at, kinds.pop()))


# -- the checks -------------------------------------------------------------------


def settle(stack: Stack, timeout: float) -> bool:
    """Wait until no run is pending or running (a run waiting for a decision counts as
    settled only once its probe could have answered)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        stack.supervise()
        row = stack.pg.query(
            "SELECT count(*) FROM runs_run WHERE status IN ('pending', 'running')"
            " OR (status = 'needs_reconciliation' AND EXISTS (SELECT 1 FROM runs_claim c"
            " WHERE c.run_id = runs_run.id AND c.status = 'unresolved'"
            " AND (c.probed_at IS NULL OR c.probe_lease_expires_at IS NOT NULL)))"
        )
        if row is not None and row[0] == 0:
            return True
        time.sleep(1)
    return False


def checks(stack: Stack, records: int = RECORDS) -> dict[str, Any]:
    from django.db import connection

    connection.close()
    q = stack.pg.query
    total, succeeded = q(
        "SELECT count(*), count(*) FILTER (WHERE status = 'succeeded') FROM runs_run"
    )
    by_status = dict(
        (s, n) for s, n in _rows(stack, "SELECT status, count(*) FROM runs_run GROUP BY status")
    )
    duplicates = q(
        "SELECT (SELECT count(*) FROM (SELECT 1 FROM examples_targetrecord"
        "   GROUP BY run_id, record_id HAVING count(*) > 1) d)"
        " + (SELECT count(*) FROM (SELECT 1 FROM examples_merge GROUP BY run_id"
        "   HAVING count(*) > 1) m)"
    )[0]
    lost = q(
        "SELECT"
        " (SELECT count(*) FROM runs_run r WHERE r.workflow = 'migrate-records'"
        "   AND r.status = 'succeeded' AND (SELECT count(DISTINCT record_id)"
        "   FROM examples_targetrecord t WHERE t.run_id = r.id) <> %s)"
        " + (SELECT count(*) FROM runs_run r WHERE r.workflow = 'merge-change-probed'"
        "   AND r.status = 'succeeded' AND NOT EXISTS (SELECT 1 FROM examples_merge m"
        "   WHERE m.run_id = r.id))"
        " + (SELECT count(*) FROM runs_run r WHERE r.workflow = 'charge-payment'"
        "   AND r.status = 'succeeded' AND NOT EXISTS (SELECT 1 FROM examples_paymentcharge p"
        "   WHERE p.idempotency_key LIKE r.id::text || '%%'))",
        (records,),
    )[0]
    went_unresolved, by_probe, by_operator, still = q(
        "SELECT count(*) FILTER (WHERE unresolved_at IS NOT NULL),"
        " count(*) FILTER (WHERE unresolved_at IS NOT NULL AND resolved_by = 'probe'),"
        " count(*) FILTER (WHERE unresolved_at IS NOT NULL AND resolved_at IS NOT NULL"
        "   AND resolved_by <> 'probe'),"
        " count(*) FILTER (WHERE status = 'unresolved') FROM runs_claim"
    )
    verify = subprocess.run(
        [sys.executable, "manage.py", "verify_history"],
        cwd=ROOT,
        env=stack.env,
        capture_output=True,
        text=True,
    )
    return {
        "runs_total": total,
        "runs_succeeded": succeeded,
        "runs_by_status": by_status,
        "duplicate_effects": duplicates,
        "lost_effects": lost,
        "guarded_unresolved": went_unresolved,
        "resolved_by_probe": by_probe,
        "resolved_by_operator": by_operator,
        "left_unresolved": still,
        "verify_history": verify.stdout.strip().splitlines()[-1] if verify.stdout else "",
        "verify_history_clean": verify.returncode == 0,
    }


def _rows(stack: Stack, sql: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(stack.pg.url.replace("postgres://", "postgresql://")) as conn:
        return list(conn.execute(sql).fetchall())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--duration", type=float, default=150.0, help="seconds of faults")
    parser.add_argument("--settle", type=float, default=240.0, help="seconds to finish after")
    parser.add_argument(
        "--migrations", type=int, default=MIGRATIONS, help="migrate-records runs over the soak"
    )
    parser.add_argument("--records", type=int, default=RECORDS, help="records per migration")
    parser.add_argument("--warmup", type=float, default=10.0, help="seconds before the first fault")
    parser.add_argument(
        "--fault-gap",
        type=float,
        nargs=2,
        default=(12.0, 24.0),
        metavar=("MIN", "MAX"),
        help="seconds between faults, drawn between MIN and MAX",
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    # Stopped from outside (timeout, Ctrl-C): still stop the servers and workers it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    base = Path(tempfile.mkdtemp(prefix="durable-runs-chaos-"))
    stack = make_stack(base)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    try:
        return soak(stack, rng, args)
    finally:
        from runs.tools.processes import stop_all

        stop_all(stack.all())
        stack.redis.kill()
        remove_private_postgres(stack.pg)
        say(f"logs kept in {base}")


def soak(stack: Stack, rng: random.Random, args: argparse.Namespace) -> int:
    for name in ("A", "B"):
        stack.start_group(name)
    skewed = stack.start_clock_skewed()
    stack.start_beat()
    for proc in stack.groups.values():
        proc.wait_ready(WORKER_READY)
    plan = schedule(rng, args.duration, args.warmup, tuple(args.fault_gap))
    say(
        f"seed {args.seed}: {len(plan)} faults over {args.duration:.0f} s: "
        + ", ".join(f"{kind}@{at:.0f}s" for at, kind in plan)
    )
    workload = Workload(rng, args.duration, args.migrations, args.records)
    recoveries: list[tuple[str, float | None]] = []
    began = time.monotonic()
    while (elapsed := time.monotonic() - began) < args.duration:
        workload.submit_due(elapsed)
        if plan and plan[0][0] <= elapsed:
            _, kind = plan.pop(0)
            repaired, hit = inject(stack, kind, rng)
            # Recovered: the attempts the fault hit are taken over (or finished), and the
            # engine commits again.
            taken = wait_taken_over(stack, hit, repaired) if hit else 0.0
            moving = wait_progress(
                stack, repaired, lambda: workload.submit_due(time.monotonic() - began)
            )
            took = None if taken is None or moving is None else max(taken, moving)
            say(f"  {kind}: " + (f"progress {took:.1f} s after repair" if took else "NO progress"))
            recoveries.append((kind, took))
            continue
        stack.supervise()
        time.sleep(rng.uniform(0.3, 1.2))
    say(f"faults over; letting everything finish (at most {args.settle:.0f} s)")
    settled = settle(stack, args.settle)
    result = checks(stack, args.records)
    times = [t for _, t in recoveries if t is not None]
    result.update(
        seed=args.seed,
        duration_s=args.duration,
        settled=settled,
        clock_skewed_worker=skewed is not None,
        submissions_refused=workload.refused,
        faults={k: sum(1 for kind, _ in recoveries if kind == k) for k in FAULTS},
        recovery_median_s=round(statistics.median(times), 2) if times else None,
        recovery_max_s=round(max(times), 2) if times else None,
        never_recovered=sum(1 for _, t in recoveries if t is None),
        worker_self_exits=len(stack.self_exits),
    )
    report(result, recoveries)
    ok = (
        result["duplicate_effects"] == 0
        and result["lost_effects"] == 0
        and result["verify_history_clean"]
        and result["never_recovered"] == 0
        and settled
    )
    return 0 if ok else 1


def report(r: dict[str, Any], recoveries: list[tuple[str, float | None]]) -> None:
    print()
    print(f"{'chaos soak, seed':<38}{r['seed']} ({r['duration_s']:.0f} s of faults)")
    print(
        f"{'runs succeeded / total':<38}{r['runs_succeeded']} / {r['runs_total']}  "
        f"{r['runs_by_status']}"
    )
    print(f"{'duplicate effects':<38}{r['duplicate_effects']}")
    print(f"{'lost effects':<38}{r['lost_effects']}")
    print(
        f"{'guarded claims left unresolved':<38}{r['guarded_unresolved']} "
        f"(resolved by probe {r['resolved_by_probe']}, still unresolved {r['left_unresolved']})"
    )
    print(f"{'verify_history':<38}{r['verify_history']}")
    print(f"{'workers that exited by themselves':<38}{r['worker_self_exits']} (restarted)")
    for kind in FAULTS:
        took = [t for k, t in recoveries if k == kind]
        shown = ", ".join("never" if t is None else f"{t:.1f}" for t in took) or "-"
        print(f"{'recovery after ' + kind + ' (s)':<38}{shown}")
    print(
        f"{'recovery median / max (s)':<38}{r['recovery_median_s']} / {r['recovery_max_s']}"
        f"{'' if r['clock_skewed_worker'] else '   (no clock-skewed worker)'}"
    )
    print(json.dumps(r))


if __name__ == "__main__":
    sys.exit(main())
