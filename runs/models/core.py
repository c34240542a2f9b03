"""Runs, steps, attempts, claims and events (docs/architecture.md#vocabulary,
#state-machines): the state a run is
made of while it runs, and the keys and signals that reach it from outside.

Invariants are database constraints, named so that a violation can be turned into a
domain error by its name. Timestamps that take part in leases default to the
database's clock (`db_default=Now()`), never a worker's (docs/architecture.md#recovery).
"""

from __future__ import annotations

import uuid

from django.contrib.postgres.fields import ArrayField
from django.db import models
from django.db.models import Q
from django.db.models.expressions import RawSQL
from django.db.models.functions import Now

from ..states import (
    RUN_FINISHED,
    AttemptStatus,
    ClaimStatus,
    EffectKind,
    RunStatus,
    StepStatus,
)


def _in(field: str, choices: type[models.TextChoices]) -> Q:
    return Q(**{f"{field}__in": choices.values})


class Run(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    workflow = models.CharField(max_length=100)
    version = models.PositiveIntegerField()
    input = models.JSONField(default=dict)
    status = models.CharField(max_length=24, choices=RunStatus.choices, default=RunStatus.PENDING)
    # Increases whenever the plan changes (a map step expanding into batches).
    plan_revision = models.PositiveIntegerField(default=1)
    # Allocator for Event.seq: `UPDATE … SET last_seq = last_seq + 1 RETURNING`.
    last_seq = models.PositiveIntegerField(default=0)
    # Top-level steps not yet succeeded; the run succeeds when it reaches 0.
    steps_remaining = models.PositiveIntegerField(default=0)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    # While compensating: how the run ends once its compensations are done (cancelled
    # or failed, as it was ending when they started).
    ends_as = models.CharField(max_length=16, blank=True, default="")
    # Who submitted it (runs/engine/policies/submit.py, Principal): "user:<username>", "cli",
    # "schedule:<name>", or "" (a direct call into the engine). Submission keys are
    # scoped to it, a submitter reads only its own runs, and a four-eyes wait refuses
    # its signal from the same person. `submitted_via`: page, api-token, api-session,
    # cli, schedule.
    submitted_by = models.CharField(max_length=160, blank=True, default="")
    submitted_via = models.CharField(max_length=24, blank=True, default="")
    # A machine's submission (a schedule's tick) names the people it acts for: the
    # schedule's creator and whoever last changed it or what it submits, as they were
    # when it fired. A four-eyes wait refuses their signal as it refuses the
    # submitter's (docs/api.md#principals).
    on_behalf_of = ArrayField(
        models.CharField(max_length=160),
        default=list,
        blank=True,
        # Also in the database: bench/ and tests insert runs in SQL.
        db_default=RawSQL("'{}'::varchar(160)[]", ()),
    )
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())
    finished_at = models.DateTimeField(null=True, blank=True)
    # Past it no step of the run starts and the sweeper ends the run as a cancel would
    # (runs/engine/policies/deadlines.py): the earlier of the workflow's `deadline=`
    # (from submission, on the database's clock) and the submission's own. None: never.
    deadline_at = models.DateTimeField(null=True, blank=True)
    # The W3C traceparent its attempts' spans are children of (runs/ops/tracing.py):
    # the web request that submitted it, or a root span of its own; "" while tracing is
    # off (docs/operating.md#tracing). In the database too: bench/ inserts runs in SQL.
    traceparent = models.CharField(max_length=55, blank=True, default="", db_default="")
    # Retention (runs/engine/policies/retention.py), each set once, in the transaction that did it:
    # the first stage that touched the run (from then on it is not retried: what a
    # retried step would read may be gone); bodies of inputs and results replaced by
    # their size and digest; events removed (RunHistorySummary keeps what they said);
    # claims and submission keys removed at the end of the dedup window.
    retention_started_at = models.DateTimeField(null=True, blank=True)
    payloads_compacted_at = models.DateTimeField(null=True, blank=True)
    compacted_at = models.DateTimeField(null=True, blank=True)
    claims_purged_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        # The runs list is ordered newest first, ties broken by id (`-created_at, -id`):
        # each index below gives that order for its filter, so a page stops after its
        # 50 rows (no sort), and the list's capped count (runs.reads.filters.COUNT_CAP) reads
        # at most that many entries. None of these columns changes when an event is
        # appended (last_seq): those updates can stay HOT.
        indexes = [
            # unfiltered, and by created time range
            models.Index(fields=["-created_at", "-id"], name="run_created_idx"),
            # by status (with or without a time range); the overview's counts per
            # status and its recent failures
            models.Index(fields=["status", "-created_at", "-id"], name="run_status_newest_idx"),
            # by workflow (with or without a time range)
            models.Index(fields=["workflow", "-created_at", "-id"], name="run_workflow_newest_idx"),
            # a submitter's own runs (the API's list for a service account)
            models.Index(
                fields=["submitted_by", "-created_at", "-id"], name="run_submitter_newest_idx"
            ),
            # Retention's candidates per stage: finished runs not yet done, oldest first.
            # Small (a run leaves each index once its stage is done) and never touched by
            # the engine's hot updates (last_seq, steps_remaining).
            models.Index(
                fields=["finished_at"],
                name="run_retention_payloads_idx",
                condition=Q(finished_at__isnull=False, payloads_compacted_at__isnull=True),
            ),
            models.Index(
                fields=["finished_at"],
                name="run_retention_events_idx",
                condition=Q(finished_at__isnull=False, compacted_at__isnull=True),
            ),
            models.Index(
                fields=["finished_at"],
                name="run_retention_claims_idx",
                condition=Q(finished_at__isnull=False, claims_purged_at__isnull=True),
            ),
            # The deadline sweep's candidates (policies/deadlines.py): runs with a
            # deadline not yet finished, soonest first; a run leaves it when it ends.
            models.Index(
                fields=["deadline_at"],
                name="run_deadline_idx",
                condition=Q(deadline_at__isnull=False, finished_at__isnull=True),
            ),
        ]
        constraints = [
            models.CheckConstraint(condition=_in("status", RunStatus), name="run_status_valid"),
            models.CheckConstraint(
                condition=Q(
                    finished_at__isnull=True,
                    status__in=[s for s in RunStatus.values if s not in RUN_FINISHED],
                )
                | Q(finished_at__isnull=False, status__in=list(RUN_FINISHED)),
                name="run_finished_at_iff_finished",
            ),
            models.CheckConstraint(
                condition=~Q(status=RunStatus.COMPENSATING)
                | Q(ends_as__in=[RunStatus.CANCELLED, RunStatus.FAILED]),
                name="run_compensating_knows_its_end",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.workflow} v{self.version} {self.id} ({self.status})"


class SubmissionKey(models.Model):
    """A client's idempotency key for submitting a run (`Idempotency-Key`,
    `submit_run --key`): the same key and the same request give back the same run,
    however often the client retries, decided by its unique (scope, key). The request
    is kept as a digest, so a different request under the same key is refused."""

    # Whose key it is (Run.submitted_by of the submission): one namespace per
    # principal, so a client can neither take another's keys nor learn its runs.
    scope = models.CharField(max_length=160, blank=True, default="")
    key = models.CharField(max_length=200)
    run = models.ForeignKey(Run, on_delete=models.PROTECT, related_name="submission_keys")
    request_digest = models.CharField(max_length=64)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [
            models.Index(fields=["run"], name="submissionkey_run_idx"),
            # the runs search finds a run by its key, whoever submitted it
            models.Index(fields=["key"], name="submissionkey_key_idx"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["scope", "key"], name="submissionkey_scope_key_unique")
        ]

    def __str__(self) -> str:
        return f"submission key {self.key} -> run {self.run_id}"


class RunSearchKey(models.Model):
    """A value a run is found by: one of its workflow's declared search fields
    (runs/workflows/search.py), as text, written in the run's submission transaction
    (runs/engine/policies/submit.py) and deleted with the run's payloads by retention
    (docs/operating.md#finding-a-run). `created_at` is the run's, copied so that one
    index gives the runs list's order (newest first) for a field's value: a page of a
    value that 100,000 runs share reads 51 entries, not 100,000."""

    run = models.ForeignKey(
        Run, on_delete=models.CASCADE, related_name="search_keys", db_index=False
    )
    workflow = models.CharField(max_length=100)
    field = models.CharField(max_length=100)
    value = models.CharField(max_length=200)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [
            # the runs list's and the API's filter, and the runs search (field = ANY(…))
            models.Index(
                fields=["field", "value", "-created_at", "-run"], name="runsearchkey_value_idx"
            ),
        ]
        constraints = [
            # one value per field per run; also serves retention's delete by run
            models.UniqueConstraint(fields=["run", "field"], name="runsearchkey_run_field_unique")
        ]

    def __str__(self) -> str:
        return f"{self.field} = {self.value} ({self.workflow}) -> run {self.run_id}"


class Step(models.Model):
    # No index of its own: step_run_key_unique (run, key) serves every lookup by run,
    # and a step's row is rewritten three times per step (each write updates every index).
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="steps", db_index=False)
    # Unique within the run: the definition's step name, or "name[i]" for batch i of a map.
    key = models.CharField(max_length=200)
    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=16, choices=EffectKind.choices)
    status = models.CharField(max_length=16, choices=StepStatus.choices, default=StepStatus.PENDING)
    depends_on = ArrayField(models.CharField(max_length=100), default=list, blank=True)
    # Dependencies not yet succeeded; the step is queued when this reaches 0.
    pending_deps = models.PositiveIntegerField(default=0)
    # Map steps: the parent holds the count of unfinished batches, each batch its items.
    # Indexed only where set (step_batches_idx below): a step of the plan (NULL here)
    # is written three times per attempt, and each write of a full index costs an entry.
    parent = models.ForeignKey(
        "self",
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="batches",
        db_index=False,
    )
    batch_index = models.PositiveIntegerField(null=True, blank=True)
    # A compensation step: the name of the step whose effect it undoes.
    compensates = models.CharField(max_length=100, blank=True, default="")
    items = models.JSONField(null=True, blank=True)
    pending_children = models.PositiveIntegerField(null=True, blank=True)
    # The plan revision in which this step entered the plan; part of its idempotency
    # key, fixed for the step's life.
    plan_revision = models.PositiveIntegerField(default=1)
    # Bumped when an operator (or probe) resolves the step's claim as failed and the
    # step is retried: the resolved claim is closed for good, the retry takes a new one.
    claim_generation = models.PositiveIntegerField(default=1)
    # Attempts started (numbers 1..attempts), of which `deferred_attempts` gave way to
    # a locked claim key and do not count against max_attempts.
    attempts = models.PositiveIntegerField(default=0)
    deferred_attempts = models.PositiveIntegerField(default=0)
    max_attempts = models.PositiveIntegerField(default=3)
    # The attempt that owns the step while it runs; finishes are fenced on it.
    # Never looked up by (only read with its step); unindexed, like the FKs above.
    current_attempt = models.ForeignKey(
        "Attempt",
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
    )
    queued_at = models.DateTimeField(null=True, blank=True)
    # Wait and sleep steps: when the sweeper wakes the step (its timeout, or the end of
    # its sleep), on the database's clock; NULL for a wait without a timeout.
    wake_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # When the step's newest message is due, on the database's clock, if it went out
    # after the first: a resume spreads its messages over minutes with countdowns
    # (policies/pauses.py), and the sweeper sets it to now for each step it republishes
    # (policies/recover.py). The sweeper counts RUNS_REPUBLISH_AFTER_SECONDS from the
    # latest of this and queued_at (a retry: next_attempt_at), so it does not send again
    # a message still on its way (one per step per bound); queued_at keeps saying since
    # when the step waits, and is never moved by a republish.
    message_due_at = models.DateTimeField(null=True, blank=True)
    # When a pause turned this step's delivery away (entry/execute.py): its message was
    # taken off the broker and none is out any more, so the resume sends it again
    # (policies/pauses.py); NULL while its message, if any, is still out. Cleared by the
    # resume's and the sweeper's republish.
    held_at = models.DateTimeField(null=True, blank=True)
    # What the step waits for while queued without a message: the scope of a full
    # concurrency limit or a key hold (runs/engine/attempts/slots.py); '' otherwise.
    # Whoever frees the slot (a finish, the sweeper, a resolution) sends its message.
    waiting_for = models.TextField(blank=True, db_default="", default="")
    # The turn a rate reserved for the step's next start (attempts/slots.py): a start at
    # or after it passes the rate without taking another turn.
    rate_due_at = models.DateTimeField(null=True, blank=True)
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(db_default=Now())
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run_id", "id"]  # the column: ordering by "run" would join runs_run
        indexes = [
            # A run's steps of the plan by name (dependents, dependencies' results, waits):
            # every such lookup is of top-level steps, and the partial index is the one a
            # generic plan of the engine's prepared statements picks (a full one once lost
            # to a BitmapAnd with a then full parent_id index).
            models.Index(
                fields=["run", "name"],
                name="step_top_run_name_idx",
                condition=Q(parent__isnull=True),
            ),
            # A map step's batches (and the foreign key's checks): only batches have a
            # parent, so the steps of the plan, written on every attempt, add no entry.
            models.Index(
                fields=["parent"],
                name="step_batches_idx",
                condition=Q(parent__isnull=False),
            ),
            # the sweeper's "queued but never started" / "retry due" scans
            models.Index(
                fields=["queued_at"],
                name="step_waiting_idx",
                condition=Q(status__in=[StepStatus.QUEUED, StepStatus.RETRYING]),
            ),
            # the overview's steps completed per minute
            models.Index(
                fields=["finished_at"],
                name="step_succeeded_at_idx",
                condition=Q(status=StepStatus.SUCCEEDED),
            ),
            # the sweeper's "timers due" scan (runs/engine/policies/waits.py)
            models.Index(
                fields=["wake_at"],
                name="step_timer_idx",
                condition=Q(status=StepStatus.WAITING, wake_at__isnull=False),
            ),
            # the steps waiting for a slot or a hold, by scope, oldest first
            # (attempts/slots.py): empty unless limits are declared and full
            models.Index(
                fields=["waiting_for", "queued_at", "id"],
                name="step_waiting_for_idx",
                condition=~Q(waiting_for=""),
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["run", "key"], name="step_run_key_unique"),
            models.CheckConstraint(condition=_in("status", StepStatus), name="step_status_valid"),
            models.CheckConstraint(condition=_in("kind", EffectKind), name="step_kind_valid"),
            models.CheckConstraint(
                condition=Q(parent__isnull=True, batch_index__isnull=True)
                | Q(parent__isnull=False, batch_index__isnull=False),
                name="step_batch_index_iff_parent",
            ),
            # Only a running step has an owning attempt (a map parent runs without one).
            models.CheckConstraint(
                condition=Q(current_attempt__isnull=True) | Q(status=StepStatus.RUNNING),
                name="step_owned_only_while_running",
            ),
            models.CheckConstraint(
                condition=Q(attempts__lte=models.F("max_attempts") + models.F("deferred_attempts")),
                name="step_attempts_bounded",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.key} ({self.status})"

    @property
    def is_map_parent(self) -> bool:
        return self.pending_children is not None

    @property
    def counted_attempts(self) -> int:
        return self.attempts - self.deferred_attempts

    @property
    def has_attempts_left(self) -> bool:
        return self.counted_attempts < self.max_attempts


class Signal(models.Model):
    """A named signal sent to a run (runs/engine/policies/waits.py), kept until a wait step of
    the run consumes it, so a signal sent before the run reaches its wait is not lost.

    `on_duplicate` is copied from the definition when the signal is received: under
    "refuse" the partial unique index admits one signal per (run, name), ever; under
    "queue" signals are kept in order and each wait consumes the oldest."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="signals")
    name = models.CharField(max_length=100)
    payload = models.JSONField(null=True, blank=True)
    actor = models.CharField(max_length=150)
    on_duplicate = models.CharField(max_length=8)
    consumed_by_step = models.ForeignKey(
        "Step", on_delete=models.CASCADE, null=True, blank=True, related_name="+"
    )
    created_at = models.DateTimeField(db_default=Now())
    consumed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["run_id", "id"]
        indexes = [models.Index(fields=["run", "name", "id"], name="signal_run_name_idx")]
        constraints = [
            models.UniqueConstraint(
                fields=["run", "name"],
                condition=Q(on_duplicate="refuse"),
                name="signal_one_per_name_when_refused",
            ),
            models.CheckConstraint(
                condition=Q(on_duplicate__in=["refuse", "queue"]),
                name="signal_on_duplicate_valid",
            ),
            models.CheckConstraint(
                condition=Q(consumed_by_step__isnull=True, consumed_at__isnull=True)
                | Q(consumed_by_step__isnull=False, consumed_at__isnull=False),
                name="signal_consumed_at_iff_consumed",
            ),
        ]

    def __str__(self) -> str:
        return f"signal {self.name} to run {self.run_id}"


class Attempt(models.Model):
    # attempt_step_number_unique (step, number) serves lookups by step.
    step = models.ForeignKey(
        Step, on_delete=models.CASCADE, related_name="attempt_set", db_index=False
    )
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    status = models.CharField(
        max_length=16, choices=AttemptStatus.choices, default=AttemptStatus.RUNNING
    )
    worker = models.CharField(max_length=200, blank=True, default="")
    started_at = models.DateTimeField(db_default=Now())
    lease_expires_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    # A guarded attempt's last lease check before it called the step's function, set by
    # that same conditional UPDATE (database clock). Recovery retries a crashed guarded
    # attempt that never got this far: it cannot have performed the effect.
    effect_entered_at = models.DateTimeField(null=True, blank=True)
    # Its span's id (16 hex digits), drawn before the start's INSERT writes it: whoever
    # ends the attempt, its worker or the recovery after a crash, emits the span with it,
    # and a resolution links to it (runs/ops/tracing.py). NULL while tracing is off.
    span_id = models.CharField(max_length=16, null=True, blank=True)  # noqa: DJ001

    class Meta:
        ordering = ["step_id", "number"]  # the column, not a join to runs_step
        indexes = [
            models.Index(
                fields=["lease_expires_at"],
                name="attempt_live_lease_idx",
                condition=Q(status=AttemptStatus.RUNNING),
            ),
            # The breaker's count (runs/engine/policies/breaker.sql): the attempts that
            # ended failed, crashed or unresolved, by when they ended; only those rows,
            # so it stays as small as the failures of the recent past.
            models.Index(
                fields=["finished_at"],
                name="attempt_bad_outcome_idx",
                condition=Q(
                    status__in=[
                        AttemptStatus.FAILED,
                        AttemptStatus.CRASHED,
                        AttemptStatus.UNRESOLVED,
                    ]
                ),
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["step", "number"], name="attempt_step_number_unique"),
            models.UniqueConstraint(
                fields=["step"],
                condition=Q(status=AttemptStatus.RUNNING),
                name="attempt_one_running_per_step",
            ),
            models.CheckConstraint(
                condition=_in("status", AttemptStatus), name="attempt_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(status=AttemptStatus.RUNNING, finished_at__isnull=True)
                | (~Q(status=AttemptStatus.RUNNING) & Q(finished_at__isnull=False)),
                name="attempt_finished_at_iff_done",
            ),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of step {self.step_id} ({self.status})"


class Claim(models.Model):
    """The durable record of one logical effect invocation. The UNIQUE key is what
    makes "at most once" a database fact rather than a hope."""

    key = models.CharField(max_length=300)
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="claims")
    # claim_step_status_idx (step, status) serves lookups by step.
    step = models.ForeignKey(Step, on_delete=models.CASCADE, related_name="claims", db_index=False)
    # NULL for a step-level claim, the item key for a map item (NULL is meaningful here).
    item_key = models.CharField(max_length=200, null=True, blank=True)  # noqa: DJ001
    kind = models.CharField(max_length=16, choices=EffectKind.choices)
    status = models.CharField(
        max_length=16, choices=ClaimStatus.choices, default=ClaimStatus.IN_FLIGHT
    )
    # Never looked up by (attempts are never deleted: their runs keep their log).
    attempt = models.ForeignKey(
        Attempt,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="claims",
        db_index=False,
    )
    result = models.JSONField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    evidence = models.JSONField(null=True, blank=True)
    resolved_by = models.CharField(max_length=150, blank=True, default="")
    resolved_at = models.DateTimeField(null=True, blank=True)
    resolution_note = models.TextField(blank=True, default="")
    # Probe of an unresolved claim (docs/architecture.md#effect-kinds): requested (message
    # sent), done.
    probe_requested_at = models.DateTimeField(null=True, blank=True)
    # Not before: a crashed guarded attempt is probed only after its lease plus a grace
    # period, so a paused worker's effect has had its chance to land first
    # (docs/architecture.md#recovery).
    probe_after = models.DateTimeField(null=True, blank=True)
    probed_at = models.DateTimeField(null=True, blank=True)
    # A probe in progress holds the claim until then (database clock); a probe whose
    # worker died is asked again once it has passed, at most RUNS_PROBE_MAX_TRIES times.
    probe_lease_expires_at = models.DateTimeField(null=True, blank=True)
    probe_tries = models.PositiveIntegerField(db_default=0)
    created_at = models.DateTimeField(db_default=Now())
    # When the claim became unresolved (database clock): how long it has waited for a
    # decision, which the operator queue orders by. Kept after the resolution.
    unresolved_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    # `field=value` of the step's declared hold (runs/workflows/limits.py), '' without
    # one: while this claim is unresolved, no step holding the same key starts.
    hold_key = models.TextField(blank=True, db_default="", default="")

    class Meta:
        ordering = ["id"]
        indexes = [
            models.Index(fields=["step", "status"], name="claim_step_status_idx"),
            # A run's step claims without its map items' (the run page, show_run,
            # verify_history, retry previews): a few entries per run, however many
            # items its maps have, and nothing for a map item's insert to maintain.
            models.Index(
                fields=["run"], name="claim_run_steps_idx", condition=Q(item_key__isnull=True)
            ),
            # the operator queue, oldest first, and its size
            models.Index(
                fields=["unresolved_at", "id"],
                name="claim_unresolved_idx",
                condition=Q(status=ClaimStatus.UNRESOLVED),
            ),
            # the history of resolutions, newest first
            models.Index(
                fields=["-resolved_at", "-id"],
                name="claim_resolved_idx",
                condition=Q(resolved_at__isnull=False),
            ),
            # a key hold's check at a start (attempts/slots.py)
            models.Index(
                fields=["hold_key"],
                name="claim_hold_idx",
                condition=Q(status=ClaimStatus.UNRESOLVED) & ~Q(hold_key=""),
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["key"], name="claim_key_unique"),
            models.CheckConstraint(condition=_in("status", ClaimStatus), name="claim_status_valid"),
            models.CheckConstraint(condition=_in("kind", EffectKind), name="claim_kind_valid"),
            # Resolution fields are all present, or all absent; and an unresolved or
            # in-flight claim cannot carry a resolution.
            models.CheckConstraint(
                condition=Q(resolved_at__isnull=True, resolved_by="")
                | Q(
                    resolved_at__isnull=False,
                    status__in=[ClaimStatus.SUCCEEDED, ClaimStatus.FAILED],
                )
                & ~Q(resolved_by=""),
                name="claim_resolution_iff_resolved",
            ),
            models.CheckConstraint(
                condition=~Q(status=ClaimStatus.UNRESOLVED) | Q(unresolved_at__isnull=False),
                name="claim_unresolved_since_known",
            ),
        ]

    def __str__(self) -> str:
        return f"claim {self.key} ({self.status})"


class Event(models.Model):
    """One append-only fact about a run, numbered by a per-run `seq`."""

    SCHEMA_VERSION = 1

    # No index of its own: event_run_seq_unique (run, seq) and event_run_type_idx lead
    # with run, and every insert would pay for a third copy.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events", db_index=False)
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=40)
    step = models.ForeignKey(
        Step, on_delete=models.CASCADE, null=True, blank=True, related_name="events"
    )
    attempt_number = models.PositiveIntegerField(null=True, blank=True)
    schema_version = models.PositiveSmallIntegerField(default=SCHEMA_VERSION)
    payload = models.JSONField(default=dict)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        ordering = ["run_id", "seq"]  # the column, not a join to runs_run
        indexes = [
            # The run page: its event log filtered by type (in seq order), the event
            # types it offers with their counts (index-only if counted as count(*),
            # not count(id)), the timeline's marks (type IN …). The unfiltered log
            # goes by event_run_seq_unique.
            models.Index(fields=["run", "type", "seq"], name="event_run_type_idx"),
            # The decision reports (runs/reads/decisions.py): the claim events of a
            # period, by time, with what counting the unresolved needs (index-only).
            # Partial: they are a small share of the log, so the index stays small and
            # other inserts do not pay for it.
            models.Index(
                fields=["created_at"],
                include=["type", "run"],
                condition=models.Q(type__in=["claim_unresolved", "claim_resolved"]),
                name="event_claim_decision_idx",
            ),
        ]
        constraints = [
            models.UniqueConstraint(fields=["run", "seq"], name="event_run_seq_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.run_id}#{self.seq} {self.type}"
