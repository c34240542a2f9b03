"""Effect kinds and the state machines (docs/architecture.md#effect-kinds and
#state-machines).

The allowed transitions are listed here for readers; the WHERE clause of each
conditional UPDATE in runs/engine/ is what enforces them, and CHECK constraints in
runs/models/ keep the values themselves valid.
"""

from django.db import models


class EffectKind(models.TextChoices):
    PURE = "pure"  # no external effect: retry freely
    TRANSACTIONAL = "transactional"  # a write to this database: claim+effect+result in one tx
    IDEMPOTENT = "idempotent"  # the external system dedupes by our idempotency key
    GUARDED = "guarded"  # irreversible, no idempotency: uncertainty goes to a human


class RunStatus(models.TextChoices):
    # pending -> running            first step starts
    # running -> needs_reconciliation   a claim became unresolved
    # needs_reconciliation -> running   every unresolved claim was resolved
    # running -> succeeded | failed    all steps succeeded | a step failed for good
    # pending|running|waiting|needs_reconciliation -> cancelled   (operator)
    # running -> waiting         a step waits for a signal or a time (no worker held);
    #                            `waiting` means: some step waits, none is unresolved
    #                            (steps of other branches may still run meanwhile)
    # waiting -> running         its last waiting step was woken (signal, timer)
    # waiting -> needs_reconciliation   a claim of another branch became unresolved
    # pending|running|waiting|needs_reconciliation -> compensating
    #                            cancelled or failed after a step with a compensation
    #                            succeeded: the compensations run, newest first
    # compensating -> cancelled | failed   all compensations finished (as the run was
    #                            ending); an unresolved one keeps the run compensating;
    #                            one failed for good: failed, naming it
    # failed -> compensating     an operator retries that failed compensation
    # cancelled | failed -> compensating   a step that names a compensation succeeded
    #                            after the run ended (it was running, or its claim was
    #                            resolved as succeeded): its compensation runs, then the
    #                            run ends as it had
    PENDING = "pending"
    RUNNING = "running"
    WAITING = "waiting"
    NEEDS_RECONCILIATION = "needs_reconciliation"
    COMPENSATING = "compensating"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


# Active: its steps may still start. A compensating run is not active (its own steps
# no longer start); only its compensation steps do (runs/engine/state/compensation.py).
RUN_ACTIVE = (
    RunStatus.PENDING,
    RunStatus.RUNNING,
    RunStatus.WAITING,
    RunStatus.NEEDS_RECONCILIATION,
)
RUN_FINISHED = (RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED)


class StepStatus(models.TextChoices):
    # pending -> queued         its dependencies succeeded
    # queued -> running         an attempt starts (only one delivery can win)
    # running -> succeeded | failed
    # running -> retrying       failed, attempts left; retrying -> running after backoff
    #                           (or deferred: its claim key was locked by another
    #                           session; a deferral does not count as an attempt)
    # running -> queued         its attempt crashed and the kind allows a retry
    # running -> unresolved     guarded effect of unknown outcome
    # unresolved -> succeeded | queued | failed   by a resolution only (nothing is
    #                           queued once the run has finished: failed or cancelled)
    # (a map parent goes pending -> running when it expands, and succeeds with its batches)
    # pending -> skipped        its condition (`when=`) was false; dependents proceed
    # queued -> waiting         a wait/sleep step found no signal yet / its time not come
    # waiting -> queued         its signal arrived or its time came (the sweeper, on
    #                           the database's clock); then queued -> succeeded | failed
    # queued -> succeeded | failed   a wait step that consumed a signal kept for it, or
    #                           whose timeout passed (on_timeout="continue" | "fail")
    # failed -> queued          an operator retries it (a step that never started, its
    #                           condition raised or its collection was refused, goes
    #                           back through pending: make-ready decides it again)
    PENDING = "pending"
    QUEUED = "queued"
    WAITING = "waiting"
    RUNNING = "running"
    RETRYING = "retrying"
    UNRESOLVED = "unresolved"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    SKIPPED = "skipped"


# Done, for a step's dependents and its run's count of steps remaining: it succeeded, or
# its condition was false. One meaning everywhere (the engine's counters, a retry's
# recount of them).
STEP_DONE = (StepStatus.SUCCEEDED, StepStatus.SKIPPED)


class AttemptStatus(models.TextChoices):
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CRASHED = "crashed"  # lease expired without a finish: declared dead by recovery
    UNRESOLVED = "unresolved"  # guarded effect of unknown outcome
    # Gave way: its claim's key was locked by another session (a paused or partitioned
    # worker's open transaction). Not counted against the step's max_attempts.
    DEFERRED = "deferred"


class ClaimStatus(models.TextChoices):
    # in_flight -> succeeded | failed | unresolved | abandoned
    # unresolved -> succeeded | failed   by a resolution (who, when, why, evidence)
    # `failed` always means "the effect did not happen". `abandoned`: an idempotent
    # step gave up with the outcome unknown; safe to retry with the same key.
    IN_FLIGHT = "in_flight"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    UNRESOLVED = "unresolved"
    ABANDONED = "abandoned"


# --- bulk operations (runs/batches/, docs/operating.md#bulk-operations) ------------------
class BatchOperation(models.TextChoices):
    CANCEL = "cancel"  # engine.cancel_run on each run
    RETRY = "retry"  # engine.retry_run: every failed step of each run
    # Each unresolved claim a reconciliation-queue filter matches, resolved with the
    # batch's outcome (reconciliation/decisions.py): its items name a claim.
    RESOLVE = "resolve"


# The operations on runs, which a runs-list filter selects (runs/batches/selection.py).
RUN_OPERATIONS = (BatchOperation.CANCEL, BatchOperation.RETRY)
RUN_OPERATION_CHOICES = [(op.value, op.label) for op in RUN_OPERATIONS]


class BatchStatus(models.TextChoices):
    # pending -> running        a worker took it up
    # running -> succeeded      every item done, none failed (refusals are not failures)
    # running -> partial        every item done, some failed (an unexpected error)
    # pending | running -> cancelled   (reserved: no path sets it yet)
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    PARTIAL = "partial"
    CANCELLED = "cancelled"


BATCH_ACTIVE = (BatchStatus.PENDING, BatchStatus.RUNNING)


class BatchItemStatus(models.TextChoices):
    # pending -> applied | refused | failed | set_aside, once, in the transaction that
    # changed the run
    PENDING = "pending"
    APPLIED = "applied"  # the engine did it
    REFUSED = "refused"  # the engine refused it (the run finished, did not fail, ...)
    FAILED = "failed"  # an unexpected error; the run's changes were rolled back
    # resolve: left undecided, to be decided one by one (evidence contradicts the
    # outcome, or another operator holds the claim); the claim stays in the queue.
    SET_ASIDE = "set_aside"
