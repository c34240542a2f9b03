"""`manage.py demo` (`make demo`): fill the dashboard of a running stack with one
example of each thing an operator deals with, by running real workflows on real worker
processes, one of them killed by the engine's own fault injection.

    merge-change-audited    its worker is killed just after the merge (fault
                            after_effect:merge); its probe reads a merge log that lags,
                            cannot tell: unresolved, with the probe's evidence
    merge-change-slow-host  the code host merges but answers after the step's lease:
                            unresolved, with the late result as evidence
    agent-refund            waits for a person's approval (a signal)
    merge-change-checked    the code host refuses the merge (NotApplied), twice: failed
    agent-refund            rejected by the account `demo-reviewer`: the run fails and
                            releases its hold first (compensated)

The command starts its own short-lived worker and beat processes on queues of its own
(so the stack's worker never takes the demo's steps, and the demo's never take the
stack's), with short engine timings, on the database and broker this process uses
(DATABASE_URL / CELERY_BROKER_URL, or the running `make up`'s var/services.env). It
submits and signals through `manage.py submit_run` / `send_signal` subprocesses on those
queues, waits until every scenario has reached its state, stops its processes, and
prints one line per scenario with its run's page. Each invocation makes new runs under
new submission keys.

The runs are submitted by the account `demo-requester` (a refund's approval must come
from someone else) and one is rejected by `demo-reviewer`, both made by the demo.

It is for a development stack, never production's: it makes an operator account, puts
demo claims in the reconciliation queue (which the webhook and the alerts announce),
and runs a beat with short timings. So it refuses to run unless DEBUG is on or it is
told `--this-is-not-production` (`make demo` says so); it never touches an account
`demo-reviewer` or `demo-requester` it did not make (it marks its own); and its
processes sweep only the demo's own runs (RUNS_SWEEP_ONLY_RUNS): no crash, probe,
republish or timer of anything else, and no batch or webhook of the stack's.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, connection

from config.health import check_broker, check_database
from runs.management.commands.createoperator import grant_role
from runs.models import Claim, Run, Step
from runs.roles import OPERATORS, SUBMITTERS
from runs.sql.dburl import database_url
from runs.states import ClaimStatus, RunStatus, StepStatus
from runs.tools.processes import (
    BEAT_READY,
    WORKER_READY,
    ChildProcess,
    ProcessError,
    celery_beat_args,
    celery_worker_args,
    stop_all,
)
from runs.workflows.registry import all_workflows

REVIEWER = "demo-reviewer"  # the account that rejects one refund (it cannot log in)
# The account that submits the demo's runs: a refund's approval must come from someone
# other than its submitter (four eyes), so not the reviewer (it cannot log in either).
REQUESTER = "demo-requester"
# How the demo knows an account is its own (its last name, shown in the admin): an
# account of that name without it belongs to someone else, and is never changed.
REVIEWER_MARK = "made by manage.py demo"
NOT_PRODUCTION = "--this-is-not-production"
POLL_SECONDS = 0.2
STOP_GRACE_SECONDS = 10.0
SUBMIT_TIMEOUT = 60.0
# The demo's own processes: crashes noticed within seconds (the faulted worker's lease),
# sweeps twice a second, a crashed guarded attempt probed a second after its lease. The
# healthy worker's own attempts keep a longer lease, so that a busy machine does not
# turn a slow step into an unresolved claim the demo did not mean to make.
TIMINGS = {
    "RUNS_LEASE_SECONDS": "15",
    "RUNS_SWEEP_INTERVAL": "0.5",
    "RUNS_PROBE_GRACE_SECONDS": "1",
    # Schedules, retention and bulk operations are the stack's business, not the demo
    # beat's.
    "RUNS_SCHEDULE_INTERVAL": "86400",
    "RUNS_RETENTION_INTERVAL": "86400",
    "RUNS_BATCH_RESUME_INTERVAL": "86400",
}
FAULTED_TIMINGS = {
    "RUNS_LEASE_SECONDS": "2",
    # Its start-up sweep must not take over other runs' queued steps (it would be
    # killed on one of them, or leave them on a queue nobody reads once it is gone).
    "RUNS_REPUBLISH_AFTER_SECONDS": "86400",
}
# Inherited variables a demo process must not have: faults of the caller's shell, a
# metrics port the stack's worker may already hold, and the webhook (the stack's beat
# sends its outbox, not the demo's).
UNSET = (
    "RUNS_FAULTS",
    "RUNS_ALLOW_FAULTS",
    "RUNS_DUPLICATE_MESSAGES",
    "RUNS_WORKER_METRICS_PORT",
    "RUNS_WEBHOOK_URL",
)


@dataclass
class Scenario:
    name: str  # short, for the key and the progress lines
    label: str  # what the dashboard shows, for the summary
    workflow: str
    data: dict[str, Any]
    faulted: bool  # runs on the worker that fault injection kills
    reached: Callable[[str], bool]  # run id -> has it reached its state?
    run_id: str = ""
    seconds: float | None = None


def _unresolved_with(evidence_key: str) -> Callable[[str], bool]:
    def reached(run_id: str) -> bool:
        return Claim.objects.filter(
            run_id=run_id, status=ClaimStatus.UNRESOLVED, evidence__has_key=evidence_key
        ).exists()

    return reached


def _status(status: str) -> Callable[[str], bool]:
    def reached(run_id: str) -> bool:
        return Run.objects.filter(pk=run_id, status=status).exists()

    return reached


def _failed_without_compensation(run_id: str) -> bool:
    return _status(RunStatus.FAILED)(run_id) and not _compensated(run_id)


def _compensated(run_id: str) -> bool:
    """Failed after every compensation it needed succeeded (at least one)."""
    if not _status(RunStatus.FAILED)(run_id):
        return False
    compensations = Step.objects.filter(run_id=run_id).exclude(compensates="")
    return (
        compensations.exists() and not compensations.exclude(status=StepStatus.SUCCEEDED).exists()
    )


def scenarios(change_id: int) -> list[Scenario]:
    ticket = change_id % 100_000
    return [
        Scenario(
            "probed",
            "unresolved: the probe could not tell",
            "merge-change-audited",
            {"change_id": change_id},
            True,
            _unresolved_with("probe"),
        ),
        Scenario(
            "late",
            "unresolved: a late result",
            "merge-change-slow-host",
            {"change_id": change_id + 1, "reply_seconds": 6},
            False,
            _unresolved_with("late_result"),
        ),
        Scenario(
            "approval",
            "waiting for approval",
            "agent-refund",
            {"ticket": ticket, "amount": 40},
            False,
            _status(RunStatus.WAITING),
        ),
        Scenario(
            "failed",
            "failed",
            "merge-change-checked",
            {"change_id": change_id + 2, "checks_pass": False},
            False,
            _failed_without_compensation,
        ),
        Scenario(
            "compensated",
            "compensated: rejected, hold released",
            "agent-refund",
            {"ticket": ticket + 1, "amount": 25},
            False,
            _compensated,
        ),
    ]


class Command(BaseCommand):
    help = (
        "Fill a running stack's dashboard with examples: two unresolved claims (one with a "
        "probe's evidence, one with a late result), a run waiting for approval, a failed "
        "run and a compensated run. Starts and stops its own worker processes; makes new "
        "runs each time."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--url",
            default="http://127.0.0.1:8000",
            help="where the dashboard is served, for the links printed (default: the one "
            "`make up` serves)",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=120.0,
            help="seconds to wait for every scenario to reach its state (default 120)",
        )
        parser.add_argument(
            NOT_PRODUCTION,
            action="store_true",
            dest="not_production",
            help="run although DEBUG is off: this database and broker are a development "
            "stack's, not production's (`make demo` passes it)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not settings.DEBUG and not options["not_production"]:
            raise CommandError(
                "manage.py demo makes an operator account and demo claims in this "
                "database's queue (the webhook and alerts announce them): it runs only "
                f"with DEBUG on or {NOT_PRODUCTION} (`make demo` passes it)"
            )
        base_url = str(options["url"]).rstrip("/")
        self._check_stack(base_url)
        started = time.monotonic()
        tag = uuid.uuid4().hex[:8]
        # Distinct change ids per invocation, so that two demos' merges are told apart.
        plan = scenarios(change_id=int(time.time()) % 1_000_000 * 10 + 1)
        unknown = sorted({s.workflow for s in plan} - {w.name for w in all_workflows()})
        if unknown:
            raise CommandError(
                f"the demo's workflows are not registered here ({', '.join(unknown)}): "
                "add examples.workflows to RUNS_WORKFLOW_MODULES (`make demo` does)"
            )
        reviewer_account()
        requester_account()
        logs = Path(tempfile.mkdtemp(prefix="demo-"))
        demo = Demo(tag, logs, self._progress)
        ok = False
        try:
            demo.run(plan, timeout=float(options["timeout"]))
            ok = True
        except ProcessError as exc:
            raise CommandError(f"{exc}\n(worker logs kept in {logs})") from exc
        finally:
            demo.stop()
            if ok:
                shutil.rmtree(logs, ignore_errors=True)
        elapsed = time.monotonic() - started
        width = max(len(s.label) for s in plan)
        for s in plan:
            self.stdout.write(f"{s.label.ljust(width)}  {base_url}/runs/{s.run_id}/")
        self._progress(f"every scenario reached its state in {elapsed:.1f}s")
        self.stdout.write(f"open {base_url}/reconciliation/")

    def _progress(self, line: str) -> None:
        self.stderr.write(f"demo: {line}")

    def _check_stack(self, base_url: str) -> None:
        """One line saying what is missing, rather than a traceback: the checks /readyz
        makes (config/health.py), each refusal in words."""
        db = connection.settings_dict
        where = f"database {db.get('NAME')} on {db.get('HOST') or 'the default socket'}"
        try:
            database = check_database()
        except DatabaseError as exc:
            reason = " ".join((str(exc).splitlines() or [""])[0].split())
            raise CommandError(
                f"cannot reach the stack's {where} ({reason}): start it with `make up` in "
                "another shell (or set DATABASE_URL), then run `make demo` again"
            ) from exc
        if not database["ok"]:
            raise CommandError(
                f"the {where} is not migrated ({database['error']}): `make up` migrates it "
                "(or `python manage.py migrate`), then run `make demo` again"
            )
        try:
            check_broker()
        except Exception as exc:
            raise CommandError(
                f"cannot reach the stack's broker ({type(exc).__name__}: {exc}): start it with "
                "`make up` in another shell (or set CELERY_BROKER_URL), then run `make demo` "
                "again"
            ) from exc
        try:
            urllib.request.urlopen(f"{base_url}/healthz", timeout=2).close()
        except (OSError, urllib.error.URLError):
            self._progress(
                f"nothing answers at {base_url}/ (is `make up` running? --url names another "
                "address); the runs are made anyway"
            )


def reviewer_account() -> User:
    """The operator that rejects a refund: an account, as the engine asks of anyone who
    signs a signal."""
    return demo_account(REVIEWER, OPERATORS)


def requester_account() -> User:
    """The submitter of the demo's runs (`submit_run --actor`)."""
    return demo_account(REQUESTER, SUBMITTERS)


def demo_account(username: str, role: str) -> User:
    """An account of the demo's, with `role`, that cannot log in. Made by the demo and
    marked so (REVIEWER_MARK); an account of that name the demo did not make is refused,
    never changed (nor made an operator)."""
    user, created = User.objects.get_or_create(
        username=username, defaults={"last_name": REVIEWER_MARK, "is_active": True}
    )
    if not created and user.last_name != REVIEWER_MARK:
        raise CommandError(
            f"an account {username!r} exists that manage.py demo did not make: the demo "
            "changes no account of anyone else's (rename that one, or run the demo on "
            "another database)"
        )
    if created or user.has_usable_password() or not user.is_active:
        user.set_unusable_password()
        user.is_active = True
    grant_role(user, role)  # saves it
    return user


class Demo:
    """The demo's processes, and what it waits for."""

    def __init__(self, tag: str, logs: Path, progress: Callable[[str], None]) -> None:
        self.tag, self.logs, self.progress = tag, logs, progress
        self.queue = f"demo-{tag}"
        self.faulted_queue = f"demo-{tag}-faulted"
        self.processes: list[ChildProcess] = []
        env = {k: v for k, v in os.environ.items() if k not in UNSET}
        env.update(
            TIMINGS,
            DATABASE_URL=database_url(connection.settings_dict),
            CELERY_BROKER_URL=str(settings.CELERY_BROKER_URL),
            SECRET_KEY=str(settings.SECRET_KEY),
            PYTHONUNBUFFERED="1",
            LOG_FORMAT="plain",
        )
        self.env = env

    def _env(self, queue: str, **extra: str) -> dict[str, str]:
        return {**self.env, "RUNS_QUEUE": queue, **extra}

    def start_processes(self) -> tuple[ChildProcess, list[ChildProcess]]:
        """The faulted worker (one run goes to its queue; it dies at its first merge's
        after_effect), a healthy worker with three processes (a slow step holds one) and
        a beat whose sweeps notice the dead worker's lease."""
        faulted = ChildProcess(
            "faulted worker",
            celery_worker_args(f"demo-{self.tag}-faulted@%h"),
            self._env(
                self.faulted_queue,
                **FAULTED_TIMINGS,
                RUNS_ALLOW_FAULTS="1",
                RUNS_FAULTS="after_effect:merge",
            ),
            self.logs / "faulted-worker.log",
        )
        self.processes.append(faulted)
        healthy_args = celery_worker_args(f"demo-{self.tag}@%h")
        healthy_args[healthy_args.index("solo")] = "prefork"
        healthy_args += ["--concurrency", "3"]
        worker = ChildProcess(
            "worker", healthy_args, self._env(self.queue), self.logs / "worker.log"
        )
        self.processes.append(worker)
        beat = ChildProcess(
            "beat",
            celery_beat_args(self.logs / "beat-schedule"),
            self._env(self.queue),
            self.logs / "beat.log",
        )
        self.processes.append(beat)
        return faulted, [worker, beat]

    def run(self, plan: list[Scenario], *, timeout: float) -> None:
        began = time.monotonic()
        # Submitted first: the demo's processes then know their runs, and sweep no other
        # (RUNS_SWEEP_ONLY_RUNS). The messages wait on the demo's queues meanwhile.
        submits = {
            s.name: self._manage(
                "submit_run",
                s.workflow,
                "--input",
                json.dumps(s.data),
                "--key",
                f"demo-{self.tag}-{s.name}",
                "--actor",
                REQUESTER,
                queue=self.faulted_queue if s.faulted else self.queue,
            )
            for s in plan
        }
        for s in plan:
            s.run_id = self._last_line(submits[s.name], f"submit_run {s.workflow}")
            self.progress(f"submitted {s.workflow} ({s.name}): run {s.run_id}")
        self.env["RUNS_SWEEP_ONLY_RUNS"] = ",".join(s.run_id for s in plan)
        self.progress(
            f"starting a worker killed by fault injection (after_effect:merge), a worker and "
            f"a beat on queue {self.queue}, sweeping only these runs; logs in {self.logs}"
        )
        faulted, healthy = self.start_processes()
        healthy[0].wait_ready(WORKER_READY)
        healthy[1].wait_ready(BEAT_READY)

        rejection: subprocess.Popen[str] | None = None
        to_reject = next(s for s in plan if s.name == "compensated")
        deadline = began + timeout
        while any(s.seconds is None for s in plan):
            for s in plan:
                if s.seconds is None and s.reached(s.run_id):
                    s.seconds = time.monotonic() - began
                    self.progress(f"{s.name}: {s.label} after {s.seconds:.1f}s")
            if rejection is None and _status(RunStatus.WAITING)(to_reject.run_id):
                rejection = self._manage(
                    "send_signal",
                    to_reject.run_id,
                    "approval",
                    "--actor",
                    REVIEWER,
                    "--payload",
                    json.dumps({"approved": False, "note": "not this time"}),
                    queue=self.queue,
                )
            if rejection is not None and rejection.poll() not in (None, 0):
                self._last_line(rejection, "send_signal approval")
            for proc in healthy:
                if proc.popen.poll() is not None:
                    raise ProcessError(
                        f"the demo's {proc.name} exited with {proc.popen.returncode}:\n"
                        f"{proc.tail()}"
                    )
            code = faulted.popen.poll()
            if code is not None and code != -signal.SIGKILL:
                raise ProcessError(
                    f"the faulted worker exited with {code}, not by the injected SIGKILL:\n"
                    f"{faulted.tail()}"
                )
            if time.monotonic() > deadline:
                missing = ", ".join(f"{s.name} (run {s.run_id})" for s in plan if s.seconds is None)
                raise ProcessError(f"not reached within {timeout:g}s: {missing}")
            time.sleep(POLL_SECONDS)
        if rejection is not None:
            self._last_line(rejection, "send_signal approval")

    def stop(self) -> None:
        stop_all(self.processes, STOP_GRACE_SECONDS)

    def _manage(self, *args: str, queue: str) -> subprocess.Popen[str]:
        """`manage.py ARGS` on `queue`: the messages it publishes go to the demo's
        workers, not to the stack's."""
        return subprocess.Popen(
            [sys.executable, str(Path(settings.BASE_DIR) / "manage.py"), *args],
            cwd=settings.BASE_DIR,
            env=self._env(queue),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    @staticmethod
    def _last_line(proc: subprocess.Popen[str], what: str) -> str:
        try:
            out, err = proc.communicate(timeout=SUBMIT_TIMEOUT)
        except subprocess.TimeoutExpired as exc:
            proc.kill()
            raise ProcessError(f"{what} did not finish within {SUBMIT_TIMEOUT:g}s") from exc
        lines = out.strip().splitlines()
        if proc.returncode != 0 or not lines:
            raise ProcessError(f"{what} exited with {proc.returncode}: {(err or out).strip()}")
        return lines[-1].strip()
