"""execute_step(): the body of the Celery task. Start an attempt, run the effect as its
kind requires, finish or fail it. Nothing here decides state on its own: every decision
is a fenced, conditional write of the layers below (attempts/start.py, attempts/finish.py,
attempts/items.py, and the policies for waits and takeovers)."""

from __future__ import annotations

import logging
import time
import traceback
from typing import Any

from django.db import connection

from runs.engine.attempts import heartbeat
from runs.engine.attempts.finish import (
    Successor,
    defer_attempt,
    fail_attempt,
    finish_batch,
    finish_with_effect,
    finish_with_result,
)
from runs.engine.attempts.items import run_batch
from runs.engine.attempts.lease import renew_lease
from runs.engine.attempts.slots import NoSlot, hand_over, wait
from runs.engine.attempts.start import (
    NotStartableHere,
    Started,
    refuse,
    republish_if_early,
    start_queued,
)
from runs.engine.core import faults, timeouts
from runs.engine.core.clock import timeout_for
from runs.engine.core.keys import step_claim_key
from runs.engine.core.timeouts import StepTimedOut
from runs.engine.policies import breaker
from runs.engine.policies.pauses import holding, mark_held
from runs.engine.policies.recover import recover_attempt, settle_late_finish
from runs.engine.policies.waits import reach_wait
from runs.engine.state.results import RunResults, collected, dependency_results
from runs.errors import AttemptFenced, ClaimBusy, ClaimNotTakeable, PostconditionFailed
from runs.models import Step
from runs.ops import metrics, tracing
from runs.ops.logcontext import log_context, payload
from runs.states import EffectKind, StepStatus
from runs.workflows import Context, FencingToken, NotApplied, registry

log = logging.getLogger(__name__)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, StepTimedOut):  # the engine's own: said without its module's path
        return f"StepTimedOut: {exc}"
    return "".join(traceback.format_exception_only(type(exc), exc)).strip()


def _context_factory(started: Started) -> Any:
    """A function that makes the `ctx` a step's function receives for this attempt
    (its results so far, its heartbeat, a map item's key), called with the claim's key
    and, for an item, the item and its key. Raises nothing; tests build a step's
    context with it (runs.engine.tools)."""
    run, step, stepdef = started.run, started.step, started.stepdef
    # The start brought the dependencies' results along (perf); any earlier step's is
    # read when asked for (RunResults).
    results = RunResults(
        run.id,
        started.results if started.results is not None else dependency_results(run.id, stepdef),
    )
    gathered = collected(run.id, stepdef.collect) if stepdef.collect else None
    # A caller's transaction around the whole attempt (its start included, uncommitted)
    # is one no other connection may renew through: it would not see the attempt, or
    # would wait for this very transaction.
    enclosed = connection.in_atomic_block

    def renew() -> None:
        renewed = time.monotonic()
        if connection.in_atomic_block and not enclosed:
            # Inside the effect's own transaction: renewed there, the attempt row would
            # stay locked until it ends, and a worker paused meanwhile could not be
            # recovered (the sweeper skips locked attempts).
            heartbeat.renew_lease_aside(
                started.attempt.id, started.lease_seconds, until=started.until
            )
        else:
            renew_lease(started.attempt.id, started.lease_seconds, until=started.until)
        started.lease.renewed(renewed)

    def make(*, item: Any = None, item_key: str | None = None, key: str | None = None) -> Context:
        return Context(
            run_id=str(run.id),
            step_name=step.name,
            input=dict(run.input),
            results=results,
            idempotency_key=key,
            attempt=started.attempt.number,
            heartbeat=renew,
            item=item,
            item_key=item_key,
            collected=gathered,
        )

    return make


def execute_step(*, step_id: int, worker: str, successors: int = 0) -> str:
    """Run one attempt of a step; return a word saying how it ended (for logs). Every
    log line written meanwhile carries the run, step, attempt and worker.

    `successors` (the Celery task passes settings.RUNS_DIRECT_SUCCESSORS): when a step's
    success makes exactly one step ready, this worker starts it itself instead of
    publishing a message for it and waiting for the broker to bring it back; at most
    that many times per message, so a long chain does not keep a worker from the rest of
    the queue. Where it can (start.start_successor), the start is part of the finish's
    transaction: a worker that dies after that commit leaves the successor running under
    a lease, recovered as any crashed attempt is. Otherwise it starts after the commit,
    through the same conditional UPDATE as a message's, so a duplicate start stays
    harmless; a worker that dies before it leaves the step queued with no message, which
    the sweeper republishes (the same repair as for a lost message)."""
    with log_context(worker=worker):
        try:
            return _execute(step_id=step_id, worker=worker, successors=successors)
        finally:
            heartbeat.close()  # if a heartbeat opened the thread's second connection


def _execute(*, step_id: int, worker: str, successors: int) -> str:
    started = start_attempt(step_id=step_id, worker=worker)
    if started is None:
        return "skipped"
    while True:
        # Only outside a caller's transaction: the successor must start after a commit.
        may_continue = successors > 0 and not connection.in_atomic_block
        outcome, successor = _run_observed(started, may_continue=may_continue)
        successors -= 1
        if started.scopes and not connection.in_atomic_block:
            hand_over(started.scopes)  # its slots are free: the oldest waiters' turn
        if successor is None:
            return outcome
        if successor.started is not None:
            started = successor.started  # its start committed with the finish
            continue
        assert successor.step_id is not None
        if started.step.parent_id is None:
            faults.hit("after_commit", started.step.name)
        following = start_attempt(step_id=successor.step_id, worker=worker)
        if following is None:
            return outcome
        started = following


def _run_observed(started: Started, *, may_continue: bool) -> tuple[str, Successor | None]:
    """run_attempt, with the attempt's log context and its metrics."""
    with log_context(
        run_id=str(started.run.id), step=started.step.key, attempt=started.attempt.number
    ):
        labels = (started.run.workflow, str(started.step.kind))
        metrics.child(metrics.STEPS, *labels, "started").inc()
        _observe_queue_wait(started, labels)
        began = time.monotonic()
        span = _attempt_span(started) if started.attempt.span_id is not None else None
        try:
            outcome, successor = run_attempt(started, may_continue=may_continue)
        except BaseException:
            # Still running (the database unreachable, a simulated crash): whoever
            # crashes it later emits its span, with the id its start wrote.
            if span is not None:
                span.abandon()
            raise
        metrics.child(metrics.STEP_SECONDS, *labels).observe(time.monotonic() - began)
        metrics.child(metrics.STEPS, *labels, outcome).inc()
        log.info("step %s attempt %s %s", started.step.key, started.attempt.number, outcome)
        if span is not None:
            span.end(SPAN_OUTCOMES.get(outcome, outcome))
        return outcome, successor


# The words run_attempt returns, as an attempt's span says them: an unresolved claim's
# attempt did what nobody knows yet.
SPAN_OUTCOMES = {"unresolved": "unknown"}


def _attempt_span(started: Started) -> tracing.AttemptSpan | None:
    """The attempt's span (runs/ops/tracing.py), current while it runs; only with
    tracing on (the attempt's row then has a span id)."""
    run, step = started.run, started.step
    assert started.attempt.span_id is not None
    if started.claim is not None:
        key = started.claim.key
    elif step.kind == EffectKind.TRANSACTIONAL and not started.is_batch:
        key = step_claim_key(run, step, started.stepdef)
    else:
        key = ""
    return tracing.start_attempt(
        traceparent=run.traceparent,
        run_id=run.id,
        span_id=started.attempt.span_id,
        start_ns=started.began_ns or time.time_ns(),
        workflow=run.workflow,
        step_name=step.name,
        attributes={
            "run_id": str(run.id),
            "step": step.key,
            "attempt": started.attempt.number,
            "effect_kind": str(step.kind),
            "claim_key": key,
            "worker": started.attempt.worker,
        },
    )


def _observe_queue_wait(started: Started, labels: tuple[str, str]) -> None:
    # The step's started_at is set by the statement that starts the attempt.
    queued, began = started.step.queued_at, started.step.started_at
    if queued is not None and began is not None and not hasattr(began, "resolve_expression"):
        wait = max(0.0, (began - queued).total_seconds())
        metrics.child(metrics.QUEUE_WAIT, *labels).observe(wait)


def run_attempt(started: Started, *, may_continue: bool = False) -> tuple[str, Successor | None]:
    """Run a started attempt's effect as its kind requires, then finish or fail it.
    Returns a word saying how it ended, and the successor this worker runs next (only
    with `may_continue`, and only after a success that made exactly one step ready)."""
    step = started.step
    make_context = _context_factory(started)
    late_evidence: dict[str, Any] = {}
    if step.parent_id is None and step.kind in (EffectKind.PURE, EffectKind.IDEMPOTENT):
        faults.hit("after_claim", step.name)
    try:
        if started.is_batch:
            with _bounded(started):
                counts = run_batch(started, make_context)
            successor = finish_batch(started, counts, may_continue=may_continue)
        elif step.kind == EffectKind.TRANSACTIONAL:
            ctx = make_context(key=step_claim_key(started.run, started.step, started.stepdef))
            faults.hit("before_claim", step.name)
            successor = finish_with_effect(
                started, lambda: _checked(started, _call(started, ctx)), may_continue=may_continue
            )
        else:
            ctx = make_context(key=started.claim.key if started.claim else None)
            if step.kind == EffectKind.GUARDED:
                if not _still_owned_before_effect(started):
                    return "fenced", None
                # From here on a death leaves the effect's outcome unknown.
                faults.hit("after_claim", step.name)
                ctx.fencing_token = fencing_token(started)
            result = _call(started, ctx)
            late_evidence = {"late_result": result}
            result = _checked(started, result)
            faults.hit("after_effect", step.name)
            successor = finish_with_result(started, result, may_continue=may_continue)
        return "succeeded", successor
    except AttemptFenced as exc:
        log.warning("late finish of step %s ignored: %s", step.key, exc)
        settle_late_finish(started, late_evidence)
        return "fenced", None
    except ClaimBusy as exc:
        log.warning("step %s attempt %s deferred: %s", step.key, started.attempt.number, exc)
        return _defer(started, exc), None
    except NotApplied as exc:
        return _fail(started, exc, uncertain=False), None
    except StepTimedOut as exc:
        # Stopped inside its call: the effect may have begun, as after any error.
        log.warning("step %s attempt %s: %s", step.key, started.attempt.number, exc)
        return _fail(started, exc, uncertain=True, timed_out=exc.seconds), None
    except Exception as exc:
        # The message may quote the step's data: its text is in the attempt's error,
        # and in the log only if RUNS_LOG_PAYLOADS allows.
        log.warning(
            "step %s attempt %s raised %s: %s",
            step.key,
            started.attempt.number,
            type(exc).__name__,
            payload(str(exc)),
        )
        return _fail(started, exc, uncertain=True), None


def fencing_token(started: Started) -> FencingToken:
    """The claim key plus the attempt number: increases with every attempt of the same
    logical effect, so an external system that keeps the highest token it has seen per
    key can refuse a stale (paused, then resumed) writer."""
    assert started.claim is not None
    return FencingToken(started.claim.key, started.attempt.number)


def _still_owned_before_effect(started: Started) -> bool:
    """Renew the lease (and check it is still ours) immediately before calling a
    guarded step's function: a worker paused since its start commit must not call an
    irreversible effect that the engine may already have handed to a probe or a retry.
    What remains after this check is the time between it and the external call.

    The same UPDATE records that the effect is entered (Attempt.effect_entered_at):
    until it commits, a worker that dies leaves an attempt that recovery knows did not
    call the function, and retries with the same claim instead of asking a person. A
    start committed early (a successor started in its predecessor's finish) therefore
    widens nothing."""
    try:
        renew_lease(
            started.attempt.id, started.lease_seconds, until=started.until, entering_effect=True
        )
    except AttemptFenced as exc:
        log.warning("step %s: %s; the effect was NOT called", started.step.key, exc)
        settle_late_finish(
            started,
            {
                "effect_called": False,
                "note": f"attempt {started.attempt.number} lost its lease before calling "
                "the step's function: it did not perform the effect",
            },
            effect_started=False,
        )
        return False
    return True


def _checked(started: Started, result: Any) -> Any:
    """Apply the step's postcondition; a failed one is an error (escalated for a
    guarded step, retried otherwise)."""
    verify = started.stepdef.verify
    if verify is not None and not verify(result):
        raise PostconditionFailed(f"verify() rejected the result of {started.step.key}: {result!r}")
    return result


def _call(started: Started, ctx: Context) -> Any:
    """The step's function, under its timeout."""
    with _bounded(started):
        return started.stepdef.fn(ctx)


def _bounded(started: Started) -> Any:
    """The attempt's timeout (core/timeouts.py); its worker process is replaced past the
    grace only where it may be: a Celery pool's child, never the web or a test."""
    return timeouts.bounded(
        timeout_for(started.stepdef),
        kill_after=started.until if timeouts.may_replace_process() else None,
        what=f"step {started.step.key} attempt {started.attempt.number}",
    )


def _fail(
    started: Started, exc: BaseException, *, uncertain: bool, timed_out: float | None = None
) -> str:
    try:
        outcome = fail_attempt(
            started, error=_describe(exc), uncertain=uncertain, timed_out=timed_out
        )
    except AttemptFenced as fenced:
        log.warning("late failure of step %s ignored: %s", started.step.key, fenced)
        settle_late_finish(started, {"late_error": _describe(exc)})
        return "fenced"
    # Failed, retrying or unresolved: an outcome the step's breaker counts, once that
    # commit is done (at once here; a caller's enclosing transaction: at its commit).
    breaker.after_outcome(started.run.workflow, started.stepdef)
    return outcome


def _defer(started: Started, exc: ClaimBusy) -> str:
    try:
        return defer_attempt(started, reason=str(exc))
    except AttemptFenced as fenced:
        log.warning("late deferral of step %s ignored: %s", started.step.key, fenced)
        settle_late_finish(started, {})
        return "fenced"


def start_attempt(*, step_id: int, worker: str) -> Started | None:
    """Start an attempt of the step, or say why not. The one start statement
    (attempts/start.py) is the transition; this path first handles what it leaves to
    it: an unknown workflow (refused, recorded), a wait (parked or ended without an
    attempt), a redelivery that finds a running step (a takeover if its lease expired),
    a claim that may not be taken again, a retry's message that came early, a step
    held by a pause (left as it is, counted), a step whose limit is full or whose key
    is held (left as it is, waiting for a slot: attempts/slots.py)."""
    if not faults.enabled():
        # The common case, a queued step: one statement moves it to running, creates its
        # attempt and returns all the attempt needs (no read before, no re-read after).
        try:
            started = start_queued(step_id, worker)
        except (NotStartableHere, ClaimNotTakeable):
            started = None  # rolled back; the careful path below says why
        except NoSlot as refused:
            wait(step_id, refused)  # rolled back: queued, until a slot frees
            return None
        if started is not None:
            return started
    step = Step.objects.select_related("run").filter(pk=step_id).first()
    if step is None:
        log.info("step %s does not exist (deleted?); message dropped", step_id)
        return None
    run = step.run
    wf = registry.get(run.workflow, run.version)
    stepdef = wf.stepdef(step.name) if wf is not None else None
    if wf is None or stepdef is None:
        refuse(step, worker, f"workflow {run.workflow} v{run.version} is unknown to its worker")
        return None
    if stepdef.is_wait:
        # Waits hold no worker and take no attempt: parked or ended in one transaction.
        outcome = reach_wait(step_id=step.id, workflow=wf, stepdef=stepdef)
        log.info("wait step %s: %s", step.key, outcome)
        return None
    if step.status == StepStatus.RUNNING and step.current_attempt_id is not None:
        # A redelivery that finds an expired lease may take over; a live one wins.
        if not recover_attempt(attempt_id=step.current_attempt_id):
            return None
    if step.status not in (StepStatus.QUEUED, StepStatus.RETRYING, StepStatus.RUNNING):
        return None
    if step.parent_id is None and step.kind != EffectKind.TRANSACTIONAL:
        faults.hit("before_claim", step.name)

    try:
        started = start_queued(step_id, worker)
    except NotStartableHere:
        started = None
    except ClaimNotTakeable as exc:
        # Nothing was written (the start rolled back); say why on the step.
        refuse(step, worker, str(exc))
        return None
    except NoSlot as refused:
        wait(step_id, refused)
        return None
    if started is None:
        paused = holding(step_id)
        if paused is not None:
            # Left queued (or retrying), not failed and not sent again: the resume
            # republishes it (policies/pauses.py), and the sweeper skips it meanwhile.
            mark_held(step_id)
            metrics.PAUSED_STARTS.labels(run.workflow).inc()
            log.info(
                "step %s of run %s is paused (pause %s by %s: %s); left %s",
                step.key,
                run.id,
                paused.pause_id,
                paused.actor,
                paused.reason,
                step.status,
            )
            return None
        republish_if_early(step_id)
    return started
