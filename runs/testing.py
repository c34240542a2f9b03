"""A test harness for workflow authors: run a workflow to the end in-process, against
the test database, with no broker and no worker.

    from runs.testing import run_inline

    def test_charge_survives_a_crash(db):
        run = run_inline("charge-payment", input={"amount": 5},
                         faults=["after_effect:charge"])
        assert run.status == "succeeded"
        assert run.results["charge"]["amount"] == 5

It drives the SAME engine functions a worker and the sweeper call (submit,
execute_step, send_signal, sweep's recover_attempt and wake_due, probe_claim); only
the transport differs: a message published after a commit lands in an in-memory queue
that the harness drains. Crash points (`"<point>:<step>[:<nth>]"`,
docs/reliability.md#fault-injection) are
simulated: at the point the harness raises SimulatedCrash (not SIGKILL), which rolls
back what the "worker" had not committed and leaves its attempt running, as a killed
worker would; then, as the sweeper would after the lease, it expires that attempt's
lease on the database's clock, calls the recover function, and redelivers the message
(acks_late). Time that a real run would wait for (retry backoff, timers, probe grace)
is skipped by moving those deadlines to the database's now().

`signals={"approval": payload}` are sent (actor "run_inline") when the run waits for
them. The run is returned when it has finished, or when nothing more can happen
without a person (an unresolved claim, a signal not given): `run.results` then holds
its top-level steps' results by name and `run.step_statuses` their statuses.

Works under pytest-django's `db` fixture (one transaction: commits are simulated by
running the on-commit callbacks at the end of each engine call) and under
`transactional_db`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any
from unittest import mock

from django.db import connection
from django.db.models.functions import Now
from django.test import TestCase

from runs import engine
from runs.engine.tools import SimulatedCrash, faults, publish, recover_attempt, wake_due
from runs.models import Attempt, Claim, Run, Step
from runs.states import RUN_FINISHED, AttemptStatus, ClaimStatus, StepStatus
from runs.workflows.definition import Workflow

log = logging.getLogger(__name__)

WORKER = "run_inline"


class HarnessStuck(AssertionError):
    """The run did not finish within max_deliveries messages (a loop?)."""


@contextmanager
def on_commit_callbacks_run() -> Iterator[None]:
    """Run on-commit callbacks at the end of an engine call even inside a test's
    enclosing transaction (under `transactional_db` they run at the real commit)."""
    if connection.in_atomic_block:
        with TestCase.captureOnCommitCallbacks(execute=True):
            yield
    else:
        yield


class _Transport:
    """Where published messages go: the in-memory queues the harness drains."""

    def __init__(self) -> None:
        self.steps: deque[int] = deque()
        self.probes: deque[int] = deque()
        self.later_steps: list[int] = []  # published with a countdown
        self.later_probes: list[int] = []

    def send(self, task: str, arg: int, countdown: float | None = None) -> None:
        """In place of the engine's publish.send: a message for the step or probe queue."""
        if task == publish.EXECUTE_STEP:
            (self.later_steps if countdown else self.steps).append(int(arg))
        elif task == publish.PROBE_CLAIM:
            (self.later_probes if countdown else self.probes).append(int(arg))
        else:
            raise AssertionError(f"the engine published a message for an unknown task {task!r}")


def run_inline(
    workflow: Workflow | str,
    input: Mapping[str, Any] | None = None,
    *,
    version: int | None = None,
    faults: list[str] | tuple[str, ...] = (),
    signals: Mapping[str, Any] | None = None,
    max_deliveries: int = 100_000,
) -> Run:
    """Submit a run of `workflow` (a registered Workflow or its name) and drive it to
    the end in-process; see the module's docstring."""
    name = workflow.name if isinstance(workflow, Workflow) else workflow
    if isinstance(workflow, Workflow) and version is None:
        version = workflow.version
    spec = _parse_faults(faults)
    pending_signals = dict(signals or {})
    transport = _Transport()
    with mock.patch.object(publish, "send", transport.send):
        faults_module_on(spec)
        try:
            with on_commit_callbacks_run():
                run = engine.submit(workflow=name, version=version, input=dict(input or {})).run
            _drive(run, transport, pending_signals, max_deliveries)
        finally:
            faults_module_on(None)
    return _finished(run)


def faults_module_on(spec: dict[tuple[str, str], int] | None) -> None:
    faults.simulate(spec)


def _parse_faults(specs: list[str] | tuple[str, ...]) -> dict[tuple[str, str], int]:
    if isinstance(specs, str):
        specs = [specs]
    return faults.parse(",".join(specs))


def _drive(
    run: Run, transport: _Transport, pending_signals: dict[str, Any], max_deliveries: int
) -> None:
    deliveries = 0
    while True:
        while transport.steps or transport.probes:
            deliveries += 1
            if deliveries > max_deliveries:
                raise HarnessStuck(f"run {run.id} not finished after {max_deliveries} messages")
            if transport.steps:
                step_id = transport.steps.popleft()
                try:
                    with on_commit_callbacks_run():
                        engine.execute_step(step_id=step_id, worker=WORKER)
                except SimulatedCrash as crash:
                    log.info("run_inline: simulated crash at %s", crash)
                    _recover_after_crash(run, transport, step_id)
            else:
                claim_id = transport.probes.popleft()
                with on_commit_callbacks_run():
                    engine.probe_claim(claim_id=claim_id)
        if Run.objects.filter(pk=run.id, status__in=RUN_FINISHED).exists():
            return
        if not _next_moment(run, transport, pending_signals):
            return  # only a person can move it on now


def _recover_after_crash(run: Run, transport: _Transport, step_id: int) -> None:
    """What happens after a worker dies: its lease runs out (moved to now on the
    database's clock), the sweeper's recover function declares its attempts crashed,
    the broker redelivers the message it had not acknowledged, and the sweeper
    republishes steps whose message was lost (queued, not started)."""
    live = list(
        Attempt.objects.filter(run=run, status=AttemptStatus.RUNNING).values_list("id", flat=True)
    )
    Attempt.objects.filter(pk__in=live).update(lease_expires_at=Now())
    with connection.cursor() as cursor:  # strictly past, on the database's clock
        cursor.execute(
            "UPDATE runs_attempt SET lease_expires_at = now() - interval '1 millisecond' "
            "WHERE id = ANY(%s)",
            [live],
        )
    for attempt_id in live:
        with on_commit_callbacks_run():
            recover_attempt(attempt_id=attempt_id)
    transport.steps.append(step_id)
    _redeliver_queued(run, transport)


def _redeliver_queued(run: Run, transport: _Transport) -> None:
    queued = Step.objects.filter(run=run, status=StepStatus.QUEUED).values_list("id", flat=True)
    for step_id in queued:
        if step_id not in transport.steps:
            transport.steps.append(step_id)


def _next_moment(run: Run, transport: _Transport, pending_signals: dict[str, Any]) -> bool:
    """Nothing is deliverable now: move the run on as time or a person would. False
    when nothing can."""
    waiting = list(
        Step.objects.filter(run=run, status=StepStatus.WAITING).values_list("name", flat=True)
    )
    from runs.workflows import registry

    wf = registry.get(run.workflow, run.version)
    for name in waiting:
        spec = wf.steps[name].wait if wf else None
        signal = spec.signal if spec else None
        if signal is not None and signal in pending_signals:
            with on_commit_callbacks_run():
                engine.send_signal(
                    run_id=run.id, name=signal, payload=pending_signals.pop(signal), actor=WORKER
                )
            return True
    # Time passes: retry backoffs, probe grace periods and timers come due.
    moved = False
    if transport.later_steps:
        Step.objects.filter(run=run, status=StepStatus.RETRYING).update(next_attempt_at=Now())
        transport.steps.extend(transport.later_steps)
        transport.later_steps.clear()
        moved = True
    if transport.later_probes:
        Claim.objects.filter(run=run, status=ClaimStatus.UNRESOLVED, probed_at__isnull=True).update(
            probe_after=Now()
        )
        transport.probes.extend(transport.later_probes)
        transport.later_probes.clear()
        moved = True
    if moved:
        return True
    timers = Step.objects.filter(run=run, status=StepStatus.WAITING, wake_at__isnull=False)
    if timers.exists():
        timers.update(wake_at=Now())
        with on_commit_callbacks_run():
            wake_due()
        return bool(transport.steps)
    # A lost message (a crash between a commit and its publish): as the sweeper would.
    _redeliver_queued(run, transport)
    return bool(transport.steps)


def _finished(run: Run) -> Run:
    run.refresh_from_db()
    steps = Step.objects.filter(run=run, parent__isnull=True).order_by("id")
    run.results = {s.name: s.result for s in steps}  # type: ignore[attr-defined]
    run.step_statuses = {s.name: s.status for s in steps}  # type: ignore[attr-defined]
    return run


__all__ = ["HarnessStuck", "SimulatedCrash", "on_commit_callbacks_run", "run_inline"]
