"""The example workflows of DESIGN.md §9, registered by default
(settings.RUNS_WORKFLOW_MODULES)."""

from __future__ import annotations

from typing import Any

from runs.workflows import (
    GUARDED,
    IDEMPOTENT,
    PURE,
    TRANSACTIONAL,
    Context,
    Field,
    ProbeResult,
    Retry,
    workflow,
)

from .fakes import CodeHost, PaymentAPI, ensure_source_records
from .models import Merge, PaymentCharge, TargetRecord

# --- migrate-records: a transactional map in batches --------------------------------
migrate_records = workflow(
    "migrate-records",
    version=1,
    input={"count": Field(int, default=500, min=0), "batch_size": Field(int, default=50, min=1)},
    description="Copy `count` source records into the target table in batches.",
    effects=lambda run_id: TargetRecord.objects.filter(run_id=run_id).count(),
    expected_effects=lambda data: data["count"],
)


@migrate_records.step(kind=PURE)
def list_records(ctx: Context) -> list[int]:
    return ensure_source_records(ctx.input["count"])


@migrate_records.map_step(
    over="list_records", batch_size="batch_size", kind=TRANSACTIONAL, retry=Retry(max_attempts=5)
)
def migrate(ctx: Context, record_id: int) -> None:
    TargetRecord.objects.create(
        record_id=record_id, run_id=ctx.run_id, payload=f"record-{record_id}"
    )


# --- merge-change: a guarded, irreversible effect ------------------------------------
merge_change = workflow(
    "merge-change",
    version=1,
    input={"change_id": Field(int, min=1)},
    description="Merge a change on a code host that has no idempotency.",
    effects=lambda run_id: Merge.objects.filter(run_id=run_id).count(),
    expected_effects=lambda data: 1,
)


@merge_change.step(kind=GUARDED, retry=Retry(max_attempts=3))
def merge(ctx: Context) -> dict[str, Any]:
    return CodeHost().merge(change_id=ctx.input["change_id"], run_id=ctx.run_id)


# --- charge-payment: an idempotent external effect -----------------------------------
charge_payment = workflow(
    "charge-payment",
    version=1,
    input={"amount": Field(int, min=1)},
    description="Charge a payment through an API that honours idempotency keys.",
    effects=lambda run_id: PaymentCharge.objects.filter(
        idempotency_key__startswith=f"{run_id}/"
    ).count(),
    expected_effects=lambda data: 1,
)


@charge_payment.step(kind=IDEMPOTENT, retry=Retry(max_attempts=5))
def charge(ctx: Context) -> dict[str, Any]:
    assert ctx.idempotency_key is not None
    return PaymentAPI().charge(amount=ctx.input["amount"], idempotency_key=ctx.idempotency_key)


# --- merge-change-probed: the same guarded merge, with a read-only probe -------------
def find_merge(ctx: Context) -> ProbeResult:
    """Ask the code host whether this run's merge happened: a definite answer lets the
    engine resolve an unresolved claim without an operator."""
    merge = CodeHost().find_merge(change_id=ctx.input["change_id"], run_id=ctx.run_id)
    if merge is None:
        return ProbeResult.not_applied(checked=f"no merge of change {ctx.input['change_id']}")
    return ProbeResult.applied(
        {"merge_id": merge.id, "change_id": merge.change_id},
        merge_id=merge.id,
        merged_at=merge.merged_at.isoformat(),
    )


merge_change_probed = workflow(
    "merge-change-probed",
    version=1,
    input={"change_id": Field(int, min=1)},
    description="merge-change, with a probe that asks the code host what happened.",
    effects=lambda run_id: Merge.objects.filter(run_id=run_id).count(),
    expected_effects=lambda data: 1,
)


@merge_change_probed.step(kind=GUARDED, name="merge", probe=find_merge, retry=Retry(max_attempts=3))
def merge_probed(ctx: Context) -> dict[str, Any]:
    return CodeHost().merge(change_id=ctx.input["change_id"], run_id=ctx.run_id)
