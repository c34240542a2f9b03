"""Fake external systems. They write with autocommit, outside the engine's
transactions, exactly as a remote system would: once they did it, it is done."""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Now

from .models import (
    FundsHold,
    Merge,
    ModelCompletion,
    PaymentCharge,
    PaymentRequest,
    Refund,
    SourceRecord,
)

# The most a change or ticket id may be: what the fake systems' columns hold
# (PositiveIntegerField); a larger one would fail in the step, at the database.
MAX_ID = 2_147_483_647


def ensure_source_records(count: int) -> list[int]:
    """The ids 1..count of the source records, creating the missing ones."""
    SourceRecord.objects.bulk_create(
        [SourceRecord(id=i, payload=f"record-{i}") for i in range(1, count + 1)],
        ignore_conflicts=True,
    )
    return list(range(1, count + 1))


class CodeHost:
    """A code host whose merge API has no idempotency: every call merges again."""

    def merge(self, *, change_id: int, run_id: str) -> dict[str, Any]:
        with transaction.atomic():
            merge = Merge.objects.create(change_id=change_id, run_id=run_id)
        return {"merge_id": merge.id, "change_id": change_id}

    def find_merge(self, *, change_id: int, run_id: str) -> Merge | None:
        """Read-only lookup (what a probe would ask the real host)."""
        return Merge.objects.filter(change_id=change_id, run_id=run_id).order_by("id").first()


class PaymentAPI:
    """A payment API that honours idempotency keys: a repeated key returns the first
    charge instead of charging again. It records every request it receives."""

    def charge(self, *, amount: int, idempotency_key: str) -> dict[str, Any]:
        with transaction.atomic():
            PaymentRequest.objects.create(idempotency_key=idempotency_key, amount=amount)
            charge, created = PaymentCharge.objects.get_or_create(
                idempotency_key=idempotency_key, defaults={"amount": amount}
            )
        return {"charge_id": charge.id, "amount": charge.amount, "replayed": not created}


class LanguageModel:
    """A fake language model API that caches completions by idempotency key (as hosted
    model APIs with request ids do): the same key returns the same answer, so a retried
    step neither pays for nor gets a different completion."""

    def complete(self, *, prompt: str, idempotency_key: str) -> dict[str, Any]:
        with transaction.atomic():
            completion, created = ModelCompletion.objects.get_or_create(
                idempotency_key=idempotency_key,
                defaults={"prompt": prompt, "response": self._think(prompt)},
            )
            if not created:
                ModelCompletion.objects.filter(pk=completion.pk).update(requests=F("requests") + 1)
        return {**completion.response, "cached": not created}

    @staticmethod
    def _think(prompt: str) -> dict[str, Any]:
        return {"action": "refund", "reason": f"the customer's request is valid: {prompt}"}


class Bank:
    """A fake bank: holds and refunds have no idempotency (every call acts again); a
    release is harmless to repeat. Lookups are read-only (what a probe asks)."""

    def hold(self, *, run_id: str, ticket: int, amount: int) -> dict[str, Any]:
        with transaction.atomic():
            hold = FundsHold.objects.create(run_id=run_id, ticket=ticket, amount=amount)
        return {"hold_id": hold.id, "amount": amount}

    def find_hold(self, *, run_id: str) -> FundsHold | None:
        return FundsHold.objects.filter(run_id=run_id).order_by("id").first()

    def release(self, *, hold_id: int) -> dict[str, Any]:
        FundsHold.objects.filter(pk=hold_id, released_at__isnull=True).update(released_at=Now())
        return {"released": hold_id}

    def refund(self, *, run_id: str, ticket: int, amount: int) -> dict[str, Any]:
        with transaction.atomic():
            refund = Refund.objects.create(run_id=run_id, ticket=ticket, amount=amount)
        return {"refund_id": refund.id, "amount": amount}

    def find_refund(self, *, run_id: str) -> Refund | None:
        return Refund.objects.filter(run_id=run_id).order_by("id").first()
