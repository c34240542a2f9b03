"""Fake external systems. They write with autocommit, outside the engine's
transactions, exactly as a remote system would: once they did it, it is done."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from .models import Merge, PaymentCharge, PaymentRequest, SourceRecord


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
