"""Decide all N matching (docs/operating.md#decide-all-matching): one operator's
"resolve every unresolved claim this filter matches as <outcome>", in one step.

A selection is a filter (incidents.ClaimFilter), not ticked rows. The decision is a
batch of the run-batch machinery (runs/batches/service.py), operation `resolve`:

- the preview (`preview`) writes nothing: how many match, what deciding them would do
  with identical consequences counted on one line, and the claims it would set aside
  (evidence that contradicts the outcome, another operator's take) with the reason;
- confirming (`start`) freezes, in one transaction, the claims that matched the filter
  when the preview was read (`as_of`: a claim unresolved after it was not shown, so it
  is left for the next decision) into one item each, and the batch row records the
  filter, the outcome, the note and who: the decision's audit, as one;
- each item is then decided in a transaction of its own, which also marks the item
  (`_resolve_item`, registered as the batch's applier): exactly once per claim however
  often its worker is killed. The set-aside rule runs again there, under the claim's
  lock (reconciliation/services.py `bulk_check`): what the preview said is checked,
  never trusted.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection, transaction
from django.http import QueryDict

from runs.batches import service as batches
from runs.engine import preview_resolutions, resolve_claim, validate_outcome, validate_resolution
from runs.errors import ClaimAlreadyResolved, InvalidResolution, ResolutionError
from runs.models import Batch, BatchItem, Claim
from runs.principals import actor_name
from runs.states import BatchOperation

from .incidents import ClaimFilter
from .services import (
    BulkSetAside,
    ClaimSetAside,
    User,
    bulk_check,
    set_aside_of,
    takes_by_others,
)
from .wording import consequence

# A decision takes at most this many claims (the runs' batches take as many runs).
MAX_CLAIMS = 10_000


class InvalidDecision(InvalidResolution):
    """A decision refused before anything was written; `field` names the input."""


@dataclass(frozen=True)
class Consequence:
    said: str  # what deciding a claim does, without what differs per claim
    count: int


@dataclass(frozen=True)
class DecisionPreview:
    filter: ClaimFilter
    outcome: str
    as_of: datetime  # the database's clock when it was read: confirming freezes these
    matched: int
    set_aside: tuple[BulkSetAside, ...]
    consequences: tuple[Consequence, ...]  # of the first `previewed` decidable claims
    previewed: int

    @property
    def decidable(self) -> int:
        return self.matched - len(self.set_aside)

    @property
    def capped(self) -> bool:
        return self.matched > MAX_CLAIMS


def _now() -> datetime:
    # statement_timestamp(), not now(): inside a transaction now() is its start, which
    # can be before claims the same transaction made unresolved.
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        (now,) = cursor.fetchone()
    assert isinstance(now, datetime)
    return now


def _matching(claim_filter: ClaimFilter, as_of: datetime) -> list[tuple[int, str, Any, Any]]:
    """(id, key, evidence, run id) of the claims the filter matches that were unresolved
    by `as_of`, the longest waiting first, at most MAX_CLAIMS + 1."""
    rows = (
        claim_filter.claims()
        .filter(unresolved_at__lte=as_of)
        .order_by("unresolved_at", "id")
        .values_list("id", "key", "evidence", "run_id")[: MAX_CLAIMS + 1]
    )
    return list(rows)


def preview(*, claim_filter: ClaimFilter, outcome: str, user: User) -> DecisionPreview:
    """What resolving every claim `claim_filter` matches as `outcome` would do, read
    now, writing nothing. The consequences are the engine's previews of the first
    RECONCILIATION_BULK_MAX claims it would decide, counted by what they say."""
    check_outcome(outcome)
    as_of = _now()
    rows = _matching(claim_filter, as_of)
    takes = takes_by_others([r[0] for r in rows], user)
    set_aside = tuple(
        aside
        for claim_id, key, evidence, _ in rows
        if (aside := set_aside_of(claim_id, key, evidence, outcome, takes.get(claim_id)))
    )
    aside_ids = {a.claim_id for a in set_aside}
    decidable = [r[0] for r in rows if r[0] not in aside_ids]
    sample = decidable[: int(settings.RECONCILIATION_BULK_MAX)]
    said = Counter(consequence(p) for p in preview_resolutions(claim_ids=sample, outcome=outcome))
    return DecisionPreview(
        filter=claim_filter,
        outcome=outcome,
        as_of=as_of,
        matched=len(rows),
        set_aside=set_aside,
        consequences=tuple(Consequence(s, n) for s, n in said.most_common()),
        previewed=len(sample),
    )


def check_outcome(outcome: str) -> None:
    """No default: a person chooses what happened."""
    if not outcome:
        raise InvalidDecision(
            "choose what happened to the effects: succeeded or failed", field="outcome"
        )
    validate_outcome(outcome)


def check(outcome: str, note: str) -> str:
    """The decision a person typed, field by field (outcome, then note): the note as
    recorded. Raises InvalidResolution naming the field."""
    check_outcome(outcome)
    return validate_resolution(outcome, note, None)


def start(
    *, claim_filter: ClaimFilter, outcome: str, note: str, as_of: datetime, user: User
) -> Batch:
    """Freeze the claims the filter matched at `as_of` (the preview's reading) that are
    still unresolved into a resolve batch, and send its first message once committed.
    Refuses (InvalidDecision, nothing written): no outcome, no note, no claim left, or
    more than MAX_CLAIMS."""
    note = check(outcome, note)
    who = actor_name(user)
    with transaction.atomic(durable=True):
        rows = _matching(claim_filter, as_of)
        if not rows:
            raise InvalidDecision(
                "no claim this filter matched is unresolved any more: nothing to decide",
                field="filter",
            )
        if len(rows) > MAX_CLAIMS:
            raise InvalidDecision(
                f"this filter matches more than {MAX_CLAIMS:,} claims, more than one decision "
                "takes: narrow it (by workflow, step, cause or age)",
                field="filter",
            )
        return batches.freeze(
            operation=BatchOperation.RESOLVE,
            filter=claim_filter.query(),
            reason=note,
            created_by=who,
            outcome=outcome,
            items=((run_id, claim_id) for claim_id, _, _, run_id in rows),
        )


def _resolve_item(batch: Batch, item: BatchItem) -> str:
    """One claim of a resolve batch, in the item's transaction: resolved as the batch's
    outcome by its creator, with its note, the batch named in the resolution's evidence
    ({"batch": id}, in the claim_resolved event too), unless the set-aside
    rule holds it back under the claim's lock (SetAside: decided one by one)."""
    assert item.claim_id is not None, "a resolve batch's items name their claims"
    model = get_user_model()
    user = model.objects.get(**{model.USERNAME_FIELD: batch.created_by})
    try:
        resolution = resolve_claim(
            item.claim_id,
            batch.outcome,
            actor=user,
            note=batch.reason,
            evidence={"batch": batch.id},
            precondition=bulk_check(batch.outcome, user),
        )
    except ClaimSetAside as exc:
        raise batches.SetAside(exc.set_aside.message) from exc
    except ClaimAlreadyResolved as exc:
        # Said without the claim's key, so that the result page counts a colleague's
        # decisions on one line rather than one line each.
        claim = exc.claim
        same = "; the same outcome" if claim.status == batch.outcome else ""
        raise ResolutionError(
            f"already resolved as {claim.status} by {claim.resolved_by}{same}"
        ) from exc
    run = resolution.run_status.replace("_", " ")
    return f"resolved as {batch.outcome}: step {resolution.step_status}, run {run}"


def register() -> None:
    """The resolve batch's applier (the app's ready())."""
    batches.register(BatchOperation.RESOLVE, _resolve_item)


def claim_keys(items: list[BatchItem]) -> dict[int, str]:
    """The idempotency keys of a page of a batch's items' claims, by claim id."""
    ids = [i.claim_id for i in items if i.claim_id is not None]
    return dict(Claim.objects.filter(pk__in=ids).values_list("id", "key")) if ids else {}


def filter_of(batch: Batch) -> ClaimFilter:
    return ClaimFilter.parse(QueryDict(batch.filter), {})


__all__ = [
    "MAX_CLAIMS",
    "Consequence",
    "DecisionPreview",
    "InvalidDecision",
    "InvalidResolution",
    "check",
    "claim_keys",
    "filter_of",
    "preview",
    "register",
    "start",
]
