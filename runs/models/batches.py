"""Bulk operations on runs (docs/operating.md#bulk-operations): a Batch is one
operator's "cancel (or retry) every run this filter matches", frozen at confirmation as
one BatchItem per run. An item moves out of pending once, in the same transaction as
the engine's change to its run, so a batch resumed after a crash never applies its
operation twice to a run and never skips one (runs/batches/service.py)."""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Now

from ..states import BatchItemStatus, BatchOperation, BatchStatus
from .core import Claim, Run


def _in(field: str, choices: type[models.TextChoices]) -> Q:
    return Q(**{f"{field}__in": choices.values})


class Batch(models.Model):
    operation = models.CharField(max_length=16, choices=BatchOperation.choices)
    # The runs list's filter as a normalized query string (runs/batches/selection.py):
    # /runs/?<filter> lists the runs it selected, as they are now. A resolve batch's is
    # the reconciliation queue's (/reconciliation/?<filter>).
    filter = models.TextField(blank=True, default="")
    # resolve: what every claim is resolved as (succeeded or failed); empty otherwise.
    outcome = models.CharField(max_length=16, blank=True, default="")
    # The reason (cancel, retry) or the note every resolution carries (resolve).
    reason = models.TextField()
    created_by = models.CharField(max_length=160)
    created_at = models.DateTimeField(db_default=Now())
    # Moved by every item done: the recovery path resumes a batch that stopped moving.
    updated_at = models.DateTimeField(db_default=Now())
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(
        max_length=16, choices=BatchStatus.choices, default=BatchStatus.PENDING
    )
    # Counted in the transaction of each item: always equal to the items' statuses.
    total = models.PositiveIntegerField(default=0)
    done = models.PositiveIntegerField(default=0)
    applied = models.PositiveIntegerField(default=0)
    refused = models.PositiveIntegerField(default=0)
    failed = models.PositiveIntegerField(default=0)
    set_aside = models.PositiveIntegerField(default=0)

    class Meta:
        indexes = [
            models.Index(fields=["-created_at", "-id"], name="batch_created_idx"),
            models.Index(
                fields=["updated_at"],
                name="batch_active_idx",
                condition=Q(status__in=["pending", "running"]),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=_in("operation", BatchOperation), name="batch_operation_valid"
            ),
            models.CheckConstraint(condition=_in("status", BatchStatus), name="batch_status_valid"),
            models.CheckConstraint(condition=~Q(reason=""), name="batch_reason_present"),
            models.CheckConstraint(
                condition=Q(done=F("applied") + F("refused") + F("failed") + F("set_aside"))
                & Q(done__lte=F("total")),
                name="batch_counts_add_up",
            ),
            models.CheckConstraint(
                condition=Q(operation="resolve", outcome__in=["succeeded", "failed"])
                | (~Q(operation="resolve") & Q(outcome="")),
                name="batch_outcome_iff_resolve",
            ),
        ]

    def __str__(self) -> str:
        return f"batch {self.pk}: {self.operation} ({self.status})"


class BatchItem(models.Model):
    batch = models.ForeignKey(Batch, on_delete=models.CASCADE, related_name="items")
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    # resolve: the claim (of `run`) the item decides; null for an operation on runs.
    claim = models.ForeignKey(Claim, null=True, on_delete=models.CASCADE, related_name="+")
    status = models.CharField(
        max_length=16, choices=BatchItemStatus.choices, default=BatchItemStatus.PENDING
    )
    message = models.TextField(blank=True, default="")
    done_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [
            # A worker's next item: the batch's pending items in id order.
            models.Index(
                fields=["batch", "id"],
                name="batchitem_pending_idx",
                condition=Q(status="pending"),
            ),
            # The result page: a batch's items by status, in id order.
            models.Index(fields=["batch", "status", "id"], name="batchitem_status_idx"),
        ]
        constraints = [
            # An operation on runs takes each run once; a resolve batch each claim once
            # (a run may have several).
            models.UniqueConstraint(
                fields=["batch", "run"],
                condition=Q(claim__isnull=True),
                name="batchitem_batch_run_unique",
            ),
            models.UniqueConstraint(
                fields=["batch", "claim"],
                condition=Q(claim__isnull=False),
                name="batchitem_batch_claim_unique",
            ),
            models.CheckConstraint(
                condition=_in("status", BatchItemStatus), name="batchitem_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(status="pending", done_at__isnull=True)
                | (~Q(status="pending") & Q(done_at__isnull=False)),
                name="batchitem_done_at_iff_done",
            ),
        ]

    def __str__(self) -> str:
        return f"batch {self.batch_id}, run {self.run_id}: {self.status}"
