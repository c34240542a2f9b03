"""A map batch's item loop (docs/architecture.md, "Map steps").

Each item is its own logical invocation with its own claim. A transactional item is
ONE transaction: fence + claim + effect + claim outcome, nothing else (no event, no
lock on the run row), so items of one run can run in parallel on several workers and
a crash loses at most the item in flight. The claims ARE the completed-item registry:
a retried batch skips every item whose claim succeeded, or that the map's compacted
registry covers (MapRegistry, written by retention: runs/engine/policies/retention.py).
"""

from __future__ import annotations

import time
from typing import Any

from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.models.functions import Now
from psycopg.types.json import Jsonb

from runs import sql
from runs.engine.core import faults, keys
from runs.engine.core.jsonvalues import ensure_json
from runs.errors import AttemptFenced
from runs.models import Claim, MapRegistry, Step
from runs.sql import prepared
from runs.states import AttemptStatus, ClaimStatus, EffectKind
from runs.workflows import Context

from .claims import insert_claim
from .lease import renew_lease
from .start import Started

SQL = sql.load(__file__)


def run_batch(started: Started, make_context: Any) -> dict[str, int]:
    """Process a batch's items; return the counts for its batch_finished event.
    Raises AttemptFenced when the attempt lost its lease (the item in hand rolls
    back), or what an item's function raised (the attempt then fails)."""
    step, run = started.step, started.run
    assert step.parent_id is not None
    parent_revision = started.parent_revision
    if parent_revision is None:
        parent_revision = Step.objects.values_list("plan_revision", flat=True).get(
            pk=step.parent_id
        )
    pairs: list[dict[str, Any]] = step.items or []
    claim_keys = {
        p["key"]: keys.item_key(run.id, step.name, parent_revision, p["key"]) for p in pairs
    }
    # The items done before (a retried batch, or one re-run after retention compacted
    # its map, which no retry does any more, but the registry still answers): those
    # with a succeeded claim, and those the compacted registry covers, whose claims are
    # gone, so their claim insert would no longer refuse them. Two reads per batch, not
    # per item, and none on a batch's first attempt: its items' keys (run, map step,
    # plan revision, item key; unique within the map) cannot have been claimed by
    # anyone before it.
    done = set() if started.attempt.number == 1 else completed_items(step, pairs, claim_keys)
    # Whether a fault point could fire: asked once per batch, not at four points of
    # every item (a worker's faults are its environment's, set at its start).
    armed = faults.armed()
    completed = skipped = 0
    for pair in pairs:
        item_key, item = pair["key"], pair["item"]
        if item_key in done:
            skipped += 1
            continue
        if armed:
            faults.hit("before_claim", step.name)
        ctx: Context = make_context(item=item, item_key=item_key, key=claim_keys[item_key])
        if step.kind == EffectKind.IDEMPOTENT:
            applied = _idempotent_item(started, ctx, claim_keys[item_key], item_key, item)
        else:
            applied = _transactional_item(
                started, ctx, claim_keys[item_key], item_key, item, armed=armed
            )
        if armed:
            faults.hit("after_commit", step.name)
        if applied:
            completed += 1
        else:
            skipped += 1
    return {"items": len(pairs), "completed": completed, "skipped": skipped}


def completed_items(
    step: Step, pairs: list[dict[str, Any]], claim_keys: dict[str, str]
) -> set[str]:
    """The batch's items already done: those with a succeeded claim, and those that a
    compacted registry (MapRegistry, written by retention) covers, whose claims it
    deleted. Both are read, so the answer is exact at every point of a compaction."""
    done = {
        str(k)
        for k in Claim.objects.filter(
            key__in=claim_keys.values(), status=ClaimStatus.SUCCEEDED
        ).values_list("item_key", flat=True)
    }
    assert step.parent_id is not None and step.batch_index is not None
    registry = MapRegistry.objects.filter(step_id=step.parent_id).first()
    if registry is not None and registry.watermark > 0:
        start = step.batch_index * registry.batch_size
        done.update(p["key"] for i, p in enumerate(pairs) if registry.covers(start + i, p["key"]))
    return done


def _insert_item_claim(
    started: Started,
    key: str,
    item_key: str,
    status: ClaimStatus = ClaimStatus.IN_FLIGHT,
    *,
    new: bool = False,
) -> int | None:
    """INSERT the item's claim; None if the key is already claimed (by an earlier
    attempt that committed it). Gives way (ClaimBusy) to a zombie whose open
    transaction holds the key. `new`: see insert_claim."""
    return insert_claim(
        key=key,
        run_id=started.run.id,
        step_id=started.step.id,
        item_key=item_key,
        kind=started.step.kind,
        attempt_id=started.attempt.id,
        status=status,
        new=new,
    )


def _complete_item_claim(claim_id: int, result: Any) -> None:
    Claim.objects.filter(pk=claim_id, status=ClaimStatus.IN_FLIGHT).update(
        status=ClaimStatus.SUCCEEDED, result=result, completed_at=Now()
    )


def _fence_item(started: Started, claim_id: int, result: Any) -> None:
    """The item's fence, last in its transaction: the attempt must still hold its lease
    (database clock), else AttemptFenced rolls the item back, effect included. Whether
    the lease is renewed on the way is decided by this worker's clock (a quarter of it
    spent since the start or the last renewal); whether it is still held, only by the
    database's. The claim gets the item's result if it has one."""
    renew = started.lease.renewal_due()
    params: dict[str, Any] = {
        "attempt": started.attempt.id,
        "running": AttemptStatus.RUNNING,
        "result": Jsonb(result),
        "claim": claim_id if result is not None else None,
    }
    if renew:
        params["lease"], params["until"] = started.lease_seconds, started.until
        started.lease.renewed(time.monotonic())
    with prepared.cursor() as cursor:
        cursor.execute(SQL["fence_renewing" if renew else "fence_held"], params)
        row = cursor.fetchone()
    if row is None or row[0] != 1:
        raise AttemptFenced(f"attempt {started.attempt.id} lost its lease")


# SQLSTATE of the item fence's refusal at commit (runs/sql/schema.sql).
ITEM_FENCE_REFUSED = "DR001"
# The claims' unique key: what refuses a second claim of one logical invocation.
CLAIM_KEY = "claim_key_unique"


def _transactional_item(
    started: Started,
    ctx: Context,
    key: str,
    item_key: str,
    item: Any,
    *,
    armed: bool = True,
) -> bool:
    """One transaction: claim + effect + claim outcome, fenced at its commit.

    The claim is inserted with its outcome (`succeeded`): the row is invisible to every
    other session until this transaction commits, and it commits only together with the
    effect and the fence, so no one can ever see it succeeded without its effect; a
    second insert of the key waits for this transaction, as it would for `in_flight`.

    The fence is a deferred constraint trigger on that claim (runs/sql/schema.sql): at the
    COMMIT, the attempt must still run under a live lease (database clock), else the
    commit fails and the item rolls back. It comes last so a paused worker's open
    transaction never locks its attempt row: recovery can still take the batch over, and
    the zombie's commit then fails. An explicit fence statement is sent only to renew
    the lease (a quarter of it spent), to record a result, or when a caller's
    transaction encloses the item (then the trigger checks at the insert).

    On the batch's first attempt the claim goes without ON CONFLICT (insert_claim's
    `new`), which only a retry needs: its items' keys (run, map step, plan revision,
    item key) are unique within the map and no earlier attempt can have committed one.
    `armed`: whether fault points can fire (run_batch)."""
    name = started.step.name
    first = started.attempt.number == 1
    nested = connection.in_atomic_block
    try:
        with transaction.atomic():
            if nested:
                with connection.cursor() as cursor:
                    cursor.execute(SQL["fence_at_insert"])
            claim_id = _insert_item_claim(started, key, item_key, ClaimStatus.SUCCEEDED, new=first)
            if claim_id is None:
                return False
            if armed:
                faults.hit("after_claim", name)
            result = ensure_json(started.stepdef.fn(ctx, item))
            if armed:
                faults.hit("after_effect", name)
            if nested or result is not None or started.lease.renewal_due():
                _fence_item(started, claim_id, result)
    except IntegrityError as exc:
        # Taken: on a first attempt, only by a second one, started after this one lost
        # its lease; this one is a zombie whose fence refuses its next commit. Skipped,
        # as insert_claim's ON CONFLICT answers a retry.
        if first and getattr(getattr(exc.__cause__, "diag", None), "constraint_name", "") == (
            CLAIM_KEY
        ):
            return False
        raise
    except DatabaseError as exc:
        if getattr(exc.__cause__, "sqlstate", None) == ITEM_FENCE_REFUSED:
            raise AttemptFenced(f"attempt {started.attempt.id} lost its lease") from exc
        raise
    return True


def _idempotent_item(started: Started, ctx: Context, key: str, item_key: str, item: Any) -> bool:
    """Claim, effect with the item's key (outside any transaction), outcome."""
    name = started.step.name
    with transaction.atomic():
        renew_lease(started.attempt.id, started.lease_seconds, until=started.until)
        claim_id = _insert_item_claim(started, key, item_key)
        if claim_id is None:
            # An earlier attempt claimed it. Still in flight (that attempt died), or
            # closed when the batch gave up (abandoned: outcome unknown; failed: not
            # applied) and now retried by an operator: take it over and retry with the
            # SAME key, which the external system dedupes. Succeeded: skip it.
            retakable = [ClaimStatus.IN_FLIGHT, ClaimStatus.ABANDONED, ClaimStatus.FAILED]
            claim_id = (
                Claim.objects.filter(key=key, status__in=retakable)
                .values_list("id", flat=True)
                .first()
            )
            if claim_id is None:
                return False
            n = Claim.objects.filter(pk=claim_id, status__in=retakable).update(
                attempt=started.attempt, status=ClaimStatus.IN_FLIGHT, error="", completed_at=None
            )
            if n != 1:
                return False
    faults.hit("after_claim", name)
    result = ensure_json(started.stepdef.fn(ctx, item))
    faults.hit("after_effect", name)
    with transaction.atomic():
        renew_lease(started.attempt.id, started.lease_seconds, until=started.until)
        _complete_item_claim(claim_id, result)
    return True
