"""Creating and processing batches (docs/operating.md#bulk-operations).

Guarantees, each held by the database rather than by this process:

- the selection is frozen when the batch is confirmed: its items are inserted by one
  `INSERT … SELECT` of the runs matching then, UNIQUE(batch, run);
- each run is changed in a transaction of its own, which takes the run's item
  (`FOR UPDATE SKIP LOCKED`, so several workers share a batch without waiting for each
  other), calls the engine, and marks the item applied or refused, and counts it on the
  batch: the item's status and the run's change commit together or not at all. A
  worker killed at any instruction leaves its item pending and its run untouched, so
  the batch resumed later applies the operation to every run exactly once;
- a refusal of the engine (the run finished, did not fail) is the item's outcome
  (refused, with the engine's message), not a failure of the batch; so is a claim a
  resolve batch sets aside (SetAside: decided one by one, never in bulk).

What an item does is its operation's applier (APPLIERS): cancel and retry are here; the
reconciliation app registers resolve (reconciliation/decisions.py), whose rule about
which claims a bulk decision may decide is its own. One machinery, one task and one
recovery path serve them all.

Lock order (docs/architecture.md#locks): the item, then what the engine's operation
takes (the run first, then its steps), then the batch row, last and briefly, for its
counts. Nothing that holds a run row waits for an item or a batch row."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import Case, Exists, F, OuterRef, Value, When
from django.db.models.functions import Now
from django.http import QueryDict

from runs import engine
from runs.errors import BatchSelectionRefused, EngineError, InvalidBatch
from runs.models import Batch, BatchItem
from runs.principals import actor_name
from runs.states import (
    BATCH_ACTIVE,
    BatchItemStatus,
    BatchOperation,
    BatchStatus,
)
from runs.userinput import BadInput, clean_text

from . import selection

# The task runs/tasks.py defines; a message names it, and carries the batch's id.
PROCESS_BATCH = "runs.process_batch"
# Items one message processes before it sends the next: a batch never holds a worker
# for long, and steps' messages queued meanwhile are served in between.
CHUNK = 100
# What a message that cannot reach PostgreSQL does: the task retries (runs/tasks.py).
DB_UNREACHABLE = (OperationalError, InterfaceError)
MESSAGE_MAX = 2000

# What one item does: the operation applied to the item's run (or claim), in the item's
# transaction, as the batch's creator; what it did, in words. Raises EngineError to
# refuse the item, SetAside to leave it for a person, anything else to fail it.
Applier = Callable[[Batch, BatchItem], str]


class SetAside(Exception):
    """An item the applier leaves undecided on purpose (its message says why)."""


def _cancel(batch: Batch, item: BatchItem) -> str:
    reason = f"{batch.reason} (batch {batch.id})"
    run = engine.cancel_run(run_id=str(item.run_id), actor=batch.created_by, reason=reason)
    if run.status == "compensating":
        return "cancelled: compensating the steps that succeeded first"
    return "cancelled"


def _retry(batch: Batch, item: BatchItem) -> str:
    reason = f"{batch.reason} (batch {batch.id})"
    run = engine.retry_run(
        run_id=str(item.run_id), actor=batch.created_by, reason=reason, batch=batch.id
    )
    return f"retried: the run is {run.status.replace('_', ' ')} again"


APPLIERS: dict[str, Applier] = {BatchOperation.CANCEL: _cancel, BatchOperation.RETRY: _retry}


def register(operation: str, applier: Applier) -> None:
    """Another app's operation (its AppConfig.ready): what each of its items does."""
    APPLIERS[operation] = applier


def freeze(
    *,
    operation: str,
    filter: str,
    reason: str,
    created_by: str,
    items: Iterable[tuple[Any, int | None]],
    outcome: str = "",
) -> Batch:
    """The batch row and its pending items, (run id, claim id or None) each, in the
    caller's transaction; its first message is sent once that commits."""
    chosen = list(items)
    batch = Batch.objects.create(
        operation=operation,
        filter=filter,
        reason=reason,
        created_by=created_by,
        outcome=outcome,
        total=len(chosen),
    )
    BatchItem.objects.bulk_create(
        [
            BatchItem(
                batch=batch,
                run_id=run_id,
                claim_id=claim_id,
                status=BatchItemStatus.PENDING,
                message="",
            )
            for run_id, claim_id in chosen
        ],
        batch_size=2000,
    )
    transaction.on_commit(lambda: send(batch.id))
    return batch


def create_batch(
    *, operation: str, params: QueryDict, actor: AbstractBaseUser | str, reason: str
) -> Batch:
    """Freeze the runs `params` (the runs list's filter) matches now into a batch, and
    send its first message once it is committed. Refuses (InvalidBatch, nothing
    written): an unknown operation, no reason, a filter the list refuses, no run or more
    than selection.MAX_RUNS runs."""
    selection.check_operation(operation)
    try:
        why = clean_text(reason, "the reason")
    except BadInput as exc:
        raise InvalidBatch(str(exc), field="reason") from exc
    if not why:
        raise InvalidBatch(
            "a reason is required: it is recorded on the batch and on every run it changes",
            field="reason",
        )
    filters = selection.parse(params)
    who = actor_name(actor)
    with transaction.atomic():
        # The selection is frozen here: the runs that match now, read and written in one
        # transaction (a filter is the runs list's, built by the ORM, so its ids are read
        # and inserted in chunks rather than spliced into an INSERT … SELECT).
        chosen = list(
            selection.selection(filters).values_list("id", flat=True)[: selection.MAX_RUNS + 1]
        )
        if not chosen:
            raise BatchSelectionRefused("no run matches this filter: nothing to do", field="filter")
        if len(chosen) > selection.MAX_RUNS:
            raise BatchSelectionRefused(
                f"this filter matches more than {selection.MAX_RUNS:,} runs, more than one "
                "batch takes: narrow it (by status, workflow or creation time)",
                field="filter",
            )
        batch = freeze(
            operation=operation,
            filter=selection.normalized(params),
            reason=why,
            created_by=who,
            items=((run_id, None) for run_id in chosen),
        )
    batch.refresh_from_db()
    return batch


def send(batch_id: int) -> None:
    engine.send_task(PROCESS_BATCH, batch_id)


@dataclass(frozen=True)
class Progress:
    batch_id: int
    processed: int  # items this call did
    more: bool  # pending items remain: send the next message

    def line(self) -> str:
        return f"batch {self.batch_id}: {self.processed} item(s)" + (", more" if self.more else "")


def process(batch_id: int, *, limit: int = CHUNK) -> Progress:
    """Process up to `limit` pending items of the batch, each in its own transaction;
    finish the batch when none is left. Any number of calls may run at once, for the
    same batch or not (each item is taken SKIP LOCKED)."""
    Batch.objects.filter(pk=batch_id, status=BatchStatus.PENDING).update(
        status=BatchStatus.RUNNING, started_at=Now(), updated_at=Now()
    )
    batch = Batch.objects.filter(pk=batch_id).first()
    if batch is None or batch.status != BatchStatus.RUNNING:
        return Progress(batch_id, 0, more=False)
    processed = 0
    while processed < limit:
        if not _process_next(batch):
            _finish(batch_id)
            return Progress(batch_id, processed, more=False)
        processed += 1
    return Progress(batch_id, processed, more=True)


def _process_next(batch: Batch) -> bool:
    """One item: its run changed by the engine and the item marked, in one transaction.
    False when no pending item is free (none left, or the rest held by other workers)."""
    with transaction.atomic():
        item = (
            BatchItem.objects.select_for_update(skip_locked=True)
            .filter(batch_id=batch.id, status=BatchItemStatus.PENDING)
            .order_by("id")
            .only("id", "run_id", "claim_id")
            .first()
        )
        if item is None:
            return False
        try:
            # A savepoint: a refusal, or an error, undoes the engine's writes only.
            with transaction.atomic():
                status, message = BatchItemStatus.APPLIED, _apply(batch, item)
        except SetAside as exc:
            status, message = BatchItemStatus.SET_ASIDE, str(exc)
        except EngineError as exc:
            status, message = BatchItemStatus.REFUSED, str(exc)
        except DB_UNREACHABLE:
            raise  # nothing was recorded: the item stays pending for the retried message
        except Exception as exc:
            status, message = BatchItemStatus.FAILED, f"{type(exc).__name__}: {exc}"
        n = BatchItem.objects.filter(pk=item.id, status=BatchItemStatus.PENDING).update(
            status=status, message=message[:MESSAGE_MAX], done_at=Now()
        )
        assert n == 1, "the item is locked and was pending"
        Batch.objects.filter(pk=batch.id).update(
            done=F("done") + 1, updated_at=Now(), **{str(status): F(str(status)) + 1}
        )
    return True


def _apply(batch: Batch, item: BatchItem) -> str:
    applier = APPLIERS.get(batch.operation)
    if applier is None:  # an app that registers it is not installed in this process
        raise RuntimeError(f"no applier for operation {batch.operation!r} in this process")
    return applier(batch, item)


def _finish(batch_id: int) -> None:
    """running → succeeded (or partial, if an item failed) once no item is pending. An
    item another worker holds is still pending here: that worker finishes the batch."""
    pending = BatchItem.objects.filter(batch_id=OuterRef("pk"), status=BatchItemStatus.PENDING)
    Batch.objects.filter(pk=batch_id, status=BatchStatus.RUNNING).exclude(Exists(pending)).update(
        status=Case(
            When(failed__gt=0, then=Value(BatchStatus.PARTIAL)),
            default=Value(BatchStatus.SUCCEEDED),
        ),
        finished_at=Now(),
        updated_at=Now(),
    )


def resume(*, stalled_only: bool = True) -> list[int]:
    """The recovery path: send a message for every batch still to do (pending or
    running) whose items stopped moving for RUNS_BATCH_STALL_SECONDS (all of them with
    `stalled_only=False`, as a worker does when it starts: its predecessor may have
    died holding one). A duplicate message is harmless: items are taken SKIP LOCKED."""
    batches = Batch.objects.filter(status__in=BATCH_ACTIVE)
    if stalled_only:
        stall = float(settings.RUNS_BATCH_STALL_SECONDS)
        batches = batches.filter(updated_at__lt=engine.db_now_plus(-stall))
    ids = list(batches.order_by("id").values_list("id", flat=True))
    for batch_id in ids:
        send(batch_id)
    return ids
