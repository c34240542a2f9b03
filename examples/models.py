"""Tables of the example workflows and of the fake external systems they call.

TargetRecord deliberately has NO unique constraint: a duplicated migration would be
visible as a second row. The fake code host's Merge table has no idempotency either.
"""

from django.db import models
from django.db.models.functions import Now


class SourceRecord(models.Model):
    id = models.PositiveIntegerField(primary_key=True)
    payload = models.CharField(max_length=100, blank=True, default="")

    def __str__(self) -> str:
        return f"source record {self.id}"


class TargetRecord(models.Model):
    record_id = models.PositiveIntegerField()
    run_id = models.UUIDField()
    payload = models.CharField(max_length=100, blank=True, default="")
    migrated_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["run_id"], name="target_run_idx")]

    def __str__(self) -> str:
        return f"target record {self.record_id} (run {self.run_id})"


class Merge(models.Model):
    """A merge performed by the fake code host. One row per merge it performed."""

    change_id = models.PositiveIntegerField()
    run_id = models.UUIDField()
    merged_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"merge of change {self.change_id}"


class PaymentRequest(models.Model):
    """Every request the fake payment API received, duplicates included."""

    idempotency_key = models.CharField(max_length=300)
    amount = models.PositiveIntegerField()
    received_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"payment request {self.idempotency_key}"


class PaymentCharge(models.Model):
    """Every charge the fake payment API made: at most one per idempotency key."""

    idempotency_key = models.CharField(max_length=300, unique=True)
    amount = models.PositiveIntegerField()
    charged_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"charge {self.idempotency_key}: {self.amount}"


class ModelCompletion(models.Model):
    """A completion of the fake language model, cached by idempotency key: asking again
    with the same key returns it (and counts the request) instead of generating anew."""

    idempotency_key = models.CharField(max_length=300, unique=True)
    prompt = models.TextField()
    response = models.JSONField()
    requests = models.PositiveIntegerField(default=1)
    created_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"completion {self.idempotency_key}"


class FundsHold(models.Model):
    """A hold placed on a customer's card by the fake bank (no idempotency: every call
    places another hold). `released_at` is set when it is released."""

    run_id = models.UUIDField()
    ticket = models.PositiveIntegerField()
    amount = models.PositiveIntegerField()
    created_at = models.DateTimeField(db_default=Now())
    released_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"hold of {self.amount} for ticket {self.ticket}"


class Refund(models.Model):
    """A refund paid by the fake bank: irreversible, no idempotency."""

    run_id = models.UUIDField()
    ticket = models.PositiveIntegerField()
    amount = models.PositiveIntegerField()
    created_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"refund of {self.amount} for ticket {self.ticket}"
