"""The example workflows of docs/authoring.md#the-example-workflows, registered where
RUNS_WORKFLOW_MODULES names this module (`make up`, `make demo`, the tests and the
benches do; a deployment registers only the modules it names).

Every number in their input has a maximum, enforced with the input's validation (400
from the API, an error beside the field on the submit page): whoever may submit a run
must not be able to make one that holds a worker, or its memory, without bound
(count=10**12 would be about 450 GB of records; the slow host's reply_seconds=1e9 a
worker process asleep for good)."""

from __future__ import annotations

from datetime import timedelta
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

from .fakes import MAX_ID, Bank, CodeHost, LanguageModel, PaymentAPI, ensure_source_records
from .models import Merge, PaymentCharge, TargetRecord

MAX_RECORDS = 100_000
MAX_BATCH_SIZE = 1_000
# A sum of money: large enough for any example (an id's bound is fakes.MAX_ID).
MAX_AMOUNT = 1_000_000

# --- migrate-records: a transactional map in batches --------------------------------
migrate_records = workflow(
    "migrate-records",
    version=1,
    input={
        # About 450 bytes of worker memory per record: at most 45 MB.
        "count": Field(int, default=500, min=0, max=MAX_RECORDS),
        "batch_size": Field(int, default=50, min=1, max=MAX_BATCH_SIZE),
    },
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
    input={"change_id": Field(int, min=1, max=MAX_ID)},
    # Operators are asked about "change 301", not a run id.
    search=("change_id",),
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
    input={"amount": Field(int, min=1, max=MAX_AMOUNT)},
    # The only thing a charge's input says; many runs share an amount, so the search
    # shows the newest first (clients' order numbers are their submission keys).
    search=("amount",),
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
    input={"change_id": Field(int, min=1, max=MAX_ID)},
    search=("change_id",),
    description="merge-change, with a probe that asks the code host what happened.",
    effects=lambda run_id: Merge.objects.filter(run_id=run_id).count(),
    expected_effects=lambda data: 1,
)


@merge_change_probed.step(kind=GUARDED, name="merge", probe=find_merge, retry=Retry(max_attempts=3))
def merge_probed(ctx: Context) -> dict[str, Any]:
    return CodeHost().merge(change_id=ctx.input["change_id"], run_id=ctx.run_id)


# --- agent-refund: an agent-style run (waits, compensation, cached model calls) ------
class Rejected(Exception):
    """A person rejected the agent's proposal."""


def find_hold(ctx: Context) -> ProbeResult:
    hold = Bank().find_hold(run_id=ctx.run_id)
    if hold is None:
        return ProbeResult.not_applied(checked="no hold for this run at the bank")
    return ProbeResult.applied({"hold_id": hold.id, "amount": hold.amount}, hold_id=hold.id)


def find_refund(ctx: Context) -> ProbeResult:
    refund = Bank().find_refund(run_id=ctx.run_id)
    if refund is None:
        return ProbeResult.not_applied(checked="no refund for this run at the bank")
    return ProbeResult.applied(
        {"refund_id": refund.id, "amount": refund.amount}, refund_id=refund.id
    )


agent_refund = workflow(
    "agent-refund",
    version=1,
    input={
        "ticket": Field(int, min=1, max=MAX_ID),
        "amount": Field(int, min=1, max=MAX_AMOUNT),
    },
    search=("ticket",),
    description="An agent proposes a refund (a cached model call), holds the funds (a "
    "guarded tool call with a probe), waits for a person's approval, then refunds; a "
    "rejection releases the hold (compensation).",
)


@agent_refund.step(kind=IDEMPOTENT, retry=Retry(max_attempts=5))
def propose(ctx: Context) -> dict[str, Any]:
    """Ask the model what to do; the idempotency key makes a retry return the cached
    completion instead of a new (different, paid-for) one."""
    assert ctx.idempotency_key is not None
    prompt = f"ticket {ctx.input['ticket']}: refund {ctx.input['amount']}?"
    return LanguageModel().complete(prompt=prompt, idempotency_key=ctx.idempotency_key)


@agent_refund.compensation(kind=IDEMPOTENT)
def release_hold(ctx: Context) -> dict[str, Any]:
    """Undo hold_funds: releasing twice is harmless."""
    return Bank().release(hold_id=ctx.results["hold_funds"]["hold_id"])


@agent_refund.step(kind=GUARDED, probe=find_hold, compensate="release_hold")
def hold_funds(ctx: Context) -> dict[str, Any]:
    """A tool call with an irreversible effect and no idempotency: guarded, probed."""
    return Bank().hold(run_id=ctx.run_id, ticket=ctx.input["ticket"], amount=ctx.input["amount"])


@agent_refund.wait(signal="approval", timeout=timedelta(days=3), on_timeout="fail", four_eyes=True)
def approval(ctx: Context) -> None:
    """A person approves (`{"approved": true}`) or rejects the proposal."""


# Two attempts: a crashed worker costs one; a rejection is retried once, then fails.
@agent_refund.step(kind=PURE, retry=Retry(max_attempts=2, base_delay=0.5, jitter=False))
def decide(ctx: Context) -> dict[str, Any]:
    decision = ctx.results["approval"]
    if decision.get("timed_out") or not (decision.get("payload") or {}).get("approved"):
        # Fails the run, which then compensates: the hold is released.
        raise Rejected(f"refund rejected by {decision.get('actor', 'nobody')}")
    return {"approved_by": decision["actor"], "proposal": ctx.results["propose"]["action"]}


@agent_refund.step(kind=GUARDED, probe=find_refund)
def refund(ctx: Context) -> dict[str, Any]:
    """The irreversible step, only after a person's approval."""
    return Bank().refund(run_id=ctx.run_id, ticket=ctx.input["ticket"], amount=ctx.input["amount"])


# --- the workflows `manage.py demo` runs, registered with these ----------------------
from examples import demo as _demo  # noqa: E402, F401
