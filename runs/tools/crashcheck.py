"""`manage.py crashcheck`: does a workflow survive its worker being killed?

For every step (in definition order) and every fault point of runs.engine.tools.faults, one
run of the workflow is executed by a REAL Celery worker process that fault injection
kills with SIGKILL at that point; then a fresh worker and beat recover it, and the
run's effects are counted against what a correct run makes:

    recovered    the run succeeded with exactly the expected effects
    escalated    the run waits for a human (an unresolved claim), no effect too many
    DUPLICATE    more effects than expected, whatever the run's status
    LOST         fewer effects than expected, a failed run, or a run that did not
                 settle within the timeout
    not reached  the point was never hit, so the worker was never killed

Isolation: each check has its own queue (RUNS_QUEUE=crashcheck-<uuid>), so a worker
of `make up` on the same broker never executes the check's steps, and the command
process never publishes anything itself: it submits with `manage.py submit_run` and
recovers with worker and beat subprocesses, all on that queue and on the database
this process is connected to (runs.sql.dburl). Their output goes to temporary log files,
kept (and named in the report) only for checks that went wrong.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection
from django.db.models import Q

from runs.engine.tools import faults
from runs.models import Attempt, Claim, Run, Step
from runs.record.history import verify_run
from runs.sql.dburl import database_url
from runs.states import RUN_ACTIVE, RUN_FINISHED, ClaimStatus, RunStatus, StepStatus
from runs.tools.processes import (
    BEAT_READY,
    WORKER_READY,
    ChildProcess,
    ProcessError,
    celery_beat_args,
    celery_worker_args,
    delete_queues,
    stop_all,
)
from runs.workflows.definition import Workflow

# The points every step is crashed at, for the command's count (it may not import the
# tools door: pyproject.toml's contracts).
FAULT_POINTS = faults.POINTS

RECOVERED = "recovered"
ESCALATED = "escalated"
DUPLICATE = "DUPLICATE"
LOST = "LOST"
NOT_REACHED = "not reached"
BAD_OUTCOMES = (DUPLICATE, LOST)

# Short engine timings for the child processes, so that a crash is noticed (lease),
# recovered (sweep) and a lost message resent (republish bound) within seconds. The
# probe grace guards against paused workers; a crashcheck's are SIGKILLed, so 1 s.
FAST_TIMINGS = {
    "RUNS_LEASE_SECONDS": "2",
    "RUNS_SWEEP_INTERVAL": "0.5",
    "RUNS_REPUBLISH_AFTER_SECONDS": "2",
    "RUNS_PROBE_GRACE_SECONDS": "1",
}
FAULTED_REPUBLISH_AFTER_SECONDS = "86400"
POLL_SECONDS = 0.1
START_TIMEOUT = 60.0
# After the run settles, how long a faulted worker may take to die: the after_commit
# point of a run's last step fires just after the commit that finished the run.
KILL_GRACE_SECONDS = 1.0
STOP_GRACE_SECONDS = 5.0

Progress = Callable[[str], None]


class CrashcheckError(ProcessError):
    """The check itself could not run (a process would not start, submit failed)."""


@dataclass
class CheckRow:
    step: str
    point: str
    outcome: str
    effects: int
    expected: int
    run_status: str
    run_id: str
    seconds: float
    killed: bool
    settled: bool
    history_problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    logs: str | None = None  # kept log directory, for checks that went wrong

    @property
    def history(self) -> str:
        return "DIFFERS" if self.history_problems else "ok"

    @property
    def failed(self) -> bool:
        return self.outcome in BAD_OUTCOMES or self.history != "ok"


def declares_effects(wf: Workflow) -> bool:
    return wf.effects is not None and wf.expected_effects is not None


def classify(*, status: str, settled: bool, effects: int, expected: int, killed: bool) -> str:
    """The outcome of one check (see the module docstring)."""
    if effects > expected:
        return DUPLICATE
    if not settled:
        outcome = LOST
    elif status == RunStatus.SUCCEEDED and effects == expected:
        outcome = RECOVERED
    elif status == RunStatus.NEEDS_RECONCILIATION:
        outcome = ESCALATED
    else:  # failed, cancelled, or succeeded with effects missing
        outcome = LOST
    if not killed and outcome in (RECOVERED, ESCALATED):
        return NOT_REACHED
    return outcome


def settled_run(run_id: str) -> Run | None:
    """The run, if it is finished or waits for a human with nothing left in motion
    (no queued, running or retrying step, no pending probe); else None."""
    run = Run.objects.get(pk=run_id)
    if run.status in RUN_FINISHED:
        return run
    if run.status != RunStatus.NEEDS_RECONCILIATION:
        return None
    moving = Step.objects.filter(
        run_id=run_id, status__in=[StepStatus.QUEUED, StepStatus.RUNNING, StepStatus.RETRYING]
    ).exists()
    # A probe not yet run, or one under way (or whose worker died: it is tried again).
    probing = (
        Claim.objects.filter(
            run_id=run_id, status=ClaimStatus.UNRESOLVED, probe_requested_at__isnull=False
        )
        .filter(Q(probed_at__isnull=True) | Q(probe_lease_expires_at__isnull=False))
        .exists()
    )
    return None if moving or probing else run


def count_effects(wf: Workflow, run: Run) -> tuple[int, int]:
    """(effects, expected): the workflow's own counters when it declares them, else
    the run's succeeded claims against all its claims."""
    if declares_effects(wf):
        assert wf.effects is not None and wf.expected_effects is not None
        return int(wf.effects(str(run.id))), int(wf.expected_effects(dict(run.input)))
    claims = Claim.objects.filter(run_id=run.id)
    return claims.filter(status=ClaimStatus.SUCCEEDED).count(), claims.count()


# --- the check ------------------------------------------------------------------------
class CrashCheck:
    def __init__(
        self,
        wf: Workflow,
        data: dict[str, Any],
        *,
        nth: int = 1,
        timeout: float = 60.0,
        lease: float = 2.0,
        progress: Progress | None = None,
    ) -> None:
        self.wf, self.data, self.nth, self.timeout = wf, data, nth, timeout
        self.lease = lease
        self.progress = progress or (lambda line: None)
        self._n = 0
        self._base_env = self._make_base_env()

    @property
    def plan(self) -> list[tuple[str, str]]:
        return [(step, point) for step in self.wf.steps for point in faults.POINTS]

    def _make_base_env(self) -> dict[str, str]:
        env = dict(os.environ)
        for key in ("RUNS_FAULTS", "RUNS_ALLOW_FAULTS", "RUNS_DUPLICATE_MESSAGES"):
            env.pop(key, None)
        env.update(FAST_TIMINGS)
        env.update(
            RUNS_LEASE_SECONDS=f"{self.lease:g}",
            DATABASE_URL=database_url(connection.settings_dict),
            CELERY_BROKER_URL=str(settings.CELERY_BROKER_URL),
            PYTHONUNBUFFERED="1",
        )
        return env

    def rows(self) -> Iterator[CheckRow]:
        busy = (
            Step.objects.filter(
                run__status__in=RUN_ACTIVE,
                status__in=[StepStatus.QUEUED, StepStatus.RUNNING, StepStatus.RETRYING],
            )
            .values("run_id")
            .distinct()
            .count()
        )
        if busy:
            self.progress(
                f"warning: {busy} other run(s) in this database have steps in motion; "
                "the check's workers sweep the whole database and may pick up their "
                "stale steps"
            )
        base = Path(tempfile.mkdtemp(prefix="crashcheck-"))
        try:
            plan = self.plan
            for index, (step, point) in enumerate(plan, 1):
                logs = base / f"{index}-{step}-{point}"
                logs.mkdir()
                try:
                    row = self.check(step, point, logs)
                except ProcessError as exc:
                    raise CrashcheckError(f"{step} {point}: {exc}\n(logs in {logs})") from exc
                except KeyboardInterrupt:
                    shutil.rmtree(logs, ignore_errors=True)
                    raise
                if row.failed:
                    row.logs = str(logs)
                else:
                    shutil.rmtree(logs, ignore_errors=True)
                self.progress(
                    f"[{index}/{len(plan)}] {step} {point}: {row.outcome} "
                    f"({row.effects}/{row.expected} effects, {row.run_status}, "
                    f"history {row.history}) in {row.seconds:.1f}s, run {row.run_id}"
                )
                yield row
        finally:
            _remove_if_empty(base)

    def check(self, step: str, point: str, logs: Path) -> CheckRow:
        started = time.monotonic()
        queue = f"crashcheck-{uuid.uuid4().hex}"
        notes: list[str] = []
        processes: list[ChildProcess] = []
        try:
            doomed = self._worker(queue, logs, faults=f"{point}:{step}:{self.nth}")
            processes.append(doomed)
            doomed.wait_ready(WORKER_READY)
            run_id = self._submit(queue)

            killed, run = self._wait_for_fault(doomed, run_id)
            worker_name = f"{socket.gethostname()}:{doomed.popen.pid}"
            stop_all([doomed], STOP_GRACE_SECONDS)
            foreign = list(
                Attempt.objects.filter(worker=worker_name)
                .exclude(run_id=run_id)
                .values_list("run_id", flat=True)
                .distinct()
            )
            if foreign:
                notes.append(
                    "the faulted worker also executed steps of other runs ("
                    + ", ".join(str(r) for r in foreign)
                    + "): the kill may not have hit this check's run"
                )
            if killed and run is None:
                worker = self._worker(queue, logs)  # sweeps when it starts
                processes.append(worker)
                beat = self._beat(queue, logs)
                processes.append(beat)
                worker.wait_ready(WORKER_READY)
                beat.wait_ready(BEAT_READY)
                run = self._wait_settled(run_id, [worker, beat])
                if run is None:
                    notes.append(f"did not settle within {self.timeout:g}s after recovery began")
            elif run is None:
                notes.append(f"did not settle within {self.timeout:g}s (the worker was not killed)")
        finally:
            stop_all(processes, STOP_GRACE_SECONDS)
            delete_queues(queue)

        settled = run is not None
        run = run or Run.objects.get(pk=run_id)
        effects, expected = count_effects(self.wf, run)
        problems = verify_run(run)
        return CheckRow(
            step=step,
            point=point,
            outcome=classify(
                status=run.status,
                settled=settled,
                effects=effects,
                expected=expected,
                killed=killed,
            ),
            effects=effects,
            expected=expected,
            run_status=str(run.status),
            run_id=str(run.id),
            seconds=time.monotonic() - started,
            killed=killed,
            settled=settled,
            history_problems=problems,
            notes=notes,
        )

    def _wait_for_fault(self, doomed: ChildProcess, run_id: str) -> tuple[bool, Run | None]:
        """Until the faulted worker dies or the run settles: (killed, settled run)."""
        deadline = time.monotonic() + self.timeout
        run: Run | None = None
        while True:
            if doomed.popen.poll() is not None:
                break
            run = settled_run(run_id)
            if run is not None:
                try:
                    doomed.popen.wait(KILL_GRACE_SECONDS)
                except subprocess.TimeoutExpired:
                    pass
                break
            if time.monotonic() > deadline:
                break
            time.sleep(POLL_SECONDS)
        code = doomed.popen.poll()
        if code is not None and code != -signal.SIGKILL:
            raise CrashcheckError(
                f"the faulted worker exited with {code}, not by the injected SIGKILL:\n"
                f"{doomed.tail()}"
            )
        if run is None:
            run = settled_run(run_id)
        return code == -signal.SIGKILL, run

    def _wait_settled(self, run_id: str, processes: list[ChildProcess]) -> Run | None:
        deadline = time.monotonic() + self.timeout
        while True:
            run = settled_run(run_id)
            if run is not None:
                return run
            for proc in processes:
                if proc.popen.poll() is not None:
                    raise CrashcheckError(
                        f"{proc.name} exited with {proc.popen.returncode} during recovery:\n"
                        f"{proc.tail()}"
                    )
            if time.monotonic() > deadline:
                return None
            time.sleep(POLL_SECONDS)

    # -- subprocesses -------------------------------------------------------------------
    def _env(self, queue: str, **extra: str) -> dict[str, str]:
        return {**self._base_env, "RUNS_QUEUE": queue, **extra}

    def _worker(self, queue: str, logs: Path, *, faults: str | None = None) -> ChildProcess:
        n = self._n
        self._n += 1
        extra = {}
        if faults:
            # The faulted worker sweeps the database when it starts: with the short
            # republish bound it would take over other runs' queued steps and might die
            # on one of them instead of on this check's run. It needs no republishing.
            extra = {
                "RUNS_ALLOW_FAULTS": "1",
                "RUNS_FAULTS": faults,
                "RUNS_REPUBLISH_AFTER_SECONDS": FAULTED_REPUBLISH_AFTER_SECONDS,
            }
        args = celery_worker_args(f"crashcheck-{n}@%h")
        name = "faulted worker" if faults else "recovery worker"
        return ChildProcess(name, args, self._env(queue, **extra), logs / f"worker-{n}.log")

    def _beat(self, queue: str, logs: Path) -> ChildProcess:
        args = celery_beat_args(logs / "beat-schedule")
        return ChildProcess("beat", args, self._env(queue), logs / "beat.log")

    def _submit(self, queue: str) -> str:
        args = [
            sys.executable,
            str(Path(settings.BASE_DIR) / "manage.py"),
            "submit_run",
            self.wf.name,
            "--version",
            str(self.wf.version),
            "--input",
            json.dumps(self.data),
        ]
        try:
            done = subprocess.run(
                args,
                cwd=settings.BASE_DIR,
                env=self._env(queue),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=START_TIMEOUT,
            )
        except subprocess.TimeoutExpired as exc:
            raise CrashcheckError(f"submit_run did not finish within {START_TIMEOUT:g}s") from exc
        lines = done.stdout.strip().splitlines()
        if done.returncode != 0 or not lines:
            raise CrashcheckError(
                f"submit_run exited with {done.returncode}:\n{done.stdout}{done.stderr}"
            )
        try:
            return str(uuid.UUID(lines[-1].strip()))
        except ValueError as exc:
            raise CrashcheckError(f"submit_run printed no run id:\n{done.stdout}") from exc


def _remove_if_empty(path: Path) -> None:
    try:
        path.rmdir()
    except OSError:
        pass


def iter_checks(
    wf: Workflow,
    data: dict[str, Any],
    *,
    nth: int = 1,
    timeout: float = 60.0,
    lease: float = 2.0,
    progress: Progress | None = None,
) -> Iterator[CheckRow]:
    """One row per (step, fault point), as each check finishes. Every subprocess of a
    check is stopped before its row is yielded, also when the check fails or is
    interrupted."""
    check = CrashCheck(wf, data, nth=nth, timeout=timeout, lease=lease, progress=progress)
    return check.rows()


# --- the report -----------------------------------------------------------------------
COLUMNS = (
    ("step", "step"),
    ("point", "point"),
    ("outcome", "outcome"),
    ("effects", "effects"),
    ("expected", "expected"),
    ("run status", "run_status"),
    ("history", "history"),
    ("run", "run_id"),
)


def failed(rows: list[CheckRow]) -> bool:
    return any(row.failed for row in rows)


def format_table(rows: list[CheckRow]) -> list[str]:
    cells = [[str(getattr(row, attr)) for _, attr in COLUMNS] for row in rows]
    headers = [title for title, _ in COLUMNS]
    widths = [max(len(c) for c in column) for column in zip(headers, *cells, strict=False)]
    return [
        "  ".join(value.ljust(width) for value, width in zip(line, widths, strict=True)).rstrip()
        for line in (headers, *cells)
    ]


def format_report(
    rows: list[CheckRow],
    wf: Workflow,
    *,
    seconds: float,
    nth: int = 1,
    interrupted: bool = False,
) -> list[str]:
    """The table, its footnotes, and a one-line summary last."""
    lines = format_table(rows)
    if not declares_effects(wf):
        lines.append(
            f"* {wf.name} declares no effects()/expected_effects(): effects are the run's "
            "succeeded claims, expected is all its claims (a duplicate effect cannot show "
            "in these counts)"
        )
    for row in rows:
        where = f"{row.step} {row.point}"
        for note in row.notes:
            lines.append(f"{where}: {note}")
        for problem in row.history_problems:
            lines.append(f"{where}: history DIFFERS: {problem}")
        if row.logs:
            lines.append(f"{where}: worker logs kept in {row.logs}")
    counts = {
        outcome: sum(row.outcome == outcome for row in rows)
        for outcome in (RECOVERED, ESCALATED, NOT_REACHED, DUPLICATE, LOST)
    }
    differs = sum(row.history != "ok" for row in rows)
    parts = [f"{n} {outcome}" for outcome, n in counts.items() if n]
    if differs:
        parts.append(f"{differs} history DIFFERS")
    verdict = "FAILED" if failed(rows) else ("INTERRUPTED" if interrupted else "OK")
    total = len(wf.steps) * len(faults.POINTS)
    done = f"{len(rows)} of {total} checks" if interrupted else f"{len(rows)} checks"
    lines.append(
        f"crashcheck {wf.name} v{wf.version} (nth={nth}): {done} in {seconds:.1f}s: "
        f"{', '.join(parts) or 'nothing checked'}: {verdict}"
    )
    return lines
