"""The operator side of reconciliation: the services the pages and the REST API call.

The rule that applies an outcome to a claim, its step and its run is the engine's
(runs/engine/policies/resolve.py); so is what a decision would do (preview_resolution) and the
probe ("check again", runs/engine/policies/probe.py). This module adds what operators need
around them:

- taking a claim ("on it"): take_claim / release_claim, decided by the database; any
  resolution releases the take in its own transaction (release_on_resolution, on the
  engine's claim_resolved), whoever resolves: an operator, a probe, a script;
- resolving from a form or the API: resolve() parses the text a person typed, names
  the field at fault, and answers a double submit with the first resolution (replayed)
  instead of an error;
- the rule of a decision over many claims (reconciliation/decisions.py): it never
  repeats an effect: a claim whose evidence contradicts the outcome, or that another
  operator holds, is set aside and reported apart (contradiction(), set_aside_of(),
  bulk_check());
- check again: reprobe().

Every public service here is keyword-only and runs in its own transaction
(`atomic(durable=True)`): call it from a view or a viewset, never from inside another
transaction (ATOMIC_REQUESTS included).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models.functions import Now
from django.utils import timezone

from runs import sql, userinput
from runs.engine import (
    ProbeOutcome,
    reprobe_claim,
    resolve_claim,
    validate_resolution,
)
from runs.errors import (
    ClaimAlreadyResolved,
    ClaimNotFound,
    ClaimNotUnresolved,
    InvalidResolution,
    NoProbe,
    ProbeError,
    ProbeInFlight,
    ProbeNotDue,
    ResolutionError,
)
from runs.models import Claim, Run, Step
from runs.pages.words import json_short
from runs.principals import actor_name
from runs.resolutions import Preview, Resolution
from runs.states import ClaimStatus
from runs.workflows import NotApplied

from .models import ClaimTake

SQL = sql.load(__file__)

log = logging.getLogger(__name__)

# A reference (a URL, a ticket) is a pointer to evidence, not the evidence itself.
REFERENCE_MAX = 2000

User = AbstractBaseUser


# --- taking a claim --------------------------------------------------------------------
class ClaimTakenByOther(ResolutionError):
    """Another operator holds a live take of the claim: who, since and until when."""

    code = "claim_taken"

    def __init__(
        self, *, claim_key: str, taken_by: str, taken_at: datetime, expires_at: datetime
    ) -> None:
        super().__init__(
            f"claim {claim_key} is taken by {taken_by} since "
            f"{taken_at.isoformat(timespec='seconds')} "
            f"(until {expires_at.isoformat(timespec='seconds')})"
        )
        self.claim_key = claim_key
        self.taken_by, self.taken_at, self.expires_at = taken_by, taken_at, expires_at


@dataclass(frozen=True)
class Take:
    """A live take: `taken_by` (a username) is on the claim until `expires_at`."""

    claim_id: int
    taken_by: str
    taken_by_id: int
    taken_at: datetime
    expires_at: datetime


def take_claim(*, claim_id: int, user: User) -> Take:
    """Take an unresolved claim ("on it") for settings.RECONCILIATION_TAKE_MINUTES, or
    renew one's own take. Refuses: ClaimTakenByOther (a live take by someone else),
    ClaimNotUnresolved, ClaimNotFound."""
    params = {
        "user": user.pk,
        "seconds": float(settings.RECONCILIATION_TAKE_MINUTES) * 60,
        "claim": claim_id,
        "unresolved": ClaimStatus.UNRESOLVED,
    }
    with transaction.atomic(durable=True):
        for _ in range(3):
            with connection.cursor() as cursor:
                cursor.execute(SQL["take_claim"], params)
                row = cursor.fetchone()
            if row is not None:
                return Take(claim_id, user.get_username(), user.pk, row[0], row[1])
            # Refused: say why. (The reads below only explain the database's decision;
            # a take released or expired in between is simply tried again.)
            claim = _claim(claim_id)
            if claim.status != ClaimStatus.UNRESOLVED:
                raise ClaimNotUnresolved(claim, doing="taken")
            other = _taken_by_other(claim)
            if other is not None:
                raise other
    raise ResolutionError(f"claim {claim_id} is being taken and released by others; try again")


def release_claim(*, claim_id: int, user: User) -> bool:
    """Release one's own take of a claim; True if there was one. Without a take it is
    a no-op (False); another operator's live take is refused (ClaimTakenByOther)."""
    with transaction.atomic(durable=True):
        deleted, _ = ClaimTake.objects.filter(claim_id=claim_id, taken_by_id=user.pk).delete()
        if deleted:
            return True
        other = _taken_by_other(_claim(claim_id))
        if other is not None:
            raise other
        return False


def release_on_resolution(sender: Any, *, claim_id: int, **kwargs: Any) -> None:
    """The engine's claim_resolved, inside the resolution's transaction: the claim is
    decided, nobody is "on it" any more (reconciliation/apps.py connects it). The same
    lock order as a take: the claim (locked by the resolution), then its take."""
    ClaimTake.objects.filter(claim_id=claim_id).delete()


def _claim(claim_id: int) -> Claim:
    claim = Claim.objects.filter(pk=claim_id).first()
    if claim is None:
        raise ClaimNotFound(f"no claim with id {claim_id}")
    return claim


def _taken_by_other(claim: Claim) -> ClaimTakenByOther | None:
    """The refusal for the claim's live take, if it has one (by anyone: the callers
    have just failed to take or delete it as theirs)."""
    take = (
        ClaimTake.objects.select_related("taken_by")
        .filter(claim_id=claim.pk, expires_at__gt=Now())
        .first()
    )
    if take is None:
        return None
    return ClaimTakenByOther(
        claim_key=claim.key,
        taken_by=take.taken_by.get_username(),
        taken_at=take.taken_at,
        expires_at=take.expires_at,
    )


# --- resolving as an operator ----------------------------------------------------------
def parse_result(text: str | None) -> Any:
    """A result typed as JSON text: empty means no result; invalid JSON is refused with
    where the error is, and so is what cannot be stored (runs/userinput.py: NaN, Infinity,
    a number too large, a NUL character, nesting too deep)."""
    try:
        return userinput.parse_json(text, "result")
    except userinput.BadInput as exc:
        raise InvalidResolution(str(exc), field="result") from exc


def clean_reference(reference: str | None) -> str | None:
    try:
        reference = userinput.clean_text(reference, "reference")
    except userinput.BadInput as exc:
        raise InvalidResolution(str(exc), field="reference") from exc
    if not reference:
        return None
    if len(reference) > REFERENCE_MAX:
        raise InvalidResolution(
            f"reference is {len(reference)} characters long; at most {REFERENCE_MAX} "
            "(link to long evidence instead of pasting it)",
            field="reference",
        )
    return reference


def resolve(
    *,
    claim_id: int,
    user: User,
    outcome: str,
    note: str,
    result_json: str | None = None,
    reference: str | None = None,
) -> Resolution:
    """Resolve an unresolved claim as an operator, from a form or the API: `outcome`
    succeeded (the effect happened; `result_json` optional) or failed (it did not),
    a required `note`, an optional `reference` (kept as evidence {"reference": …}).
    The resolution releases the claim's take (release_on_resolution).

    A double submit resolves once: if the claim is already resolved by this user with
    this outcome and note, the existing resolution comes back with replayed=True.
    Refuses (nothing written): InvalidResolution (its `field` says which input),
    ClaimAlreadyResolved (someone else decided first: who, when, what),
    ClaimNotUnresolved, ClaimNotFound, ResolutionError."""
    # Field by field, in the form's order: outcome, note, result, reference.
    validate_resolution(outcome, note, None)
    result = parse_result(result_json)
    note = validate_resolution(outcome, note, result)
    evidence = _evidence(clean_reference(reference))
    return _decide(claim_id, user, outcome, note, result, evidence)


def _decide(
    claim_id: int,
    user: User,
    outcome: str,
    note: str,
    result: Any,
    evidence: dict[str, Any] | None,
    precondition: Callable[[int, Any], None] | None = None,
) -> Resolution:
    """resolve()'s transaction, with the decision already checked; `precondition` is
    resolve_claim's (called under the claim's lock: a bulk decision's set-aside rule)."""
    who = actor_name(user)
    with transaction.atomic(durable=True):
        try:
            resolution = resolve_claim(
                claim_id,
                outcome,
                actor=user,
                note=note,
                result=result,
                evidence=evidence,
                precondition=precondition,
            )
        except ClaimAlreadyResolved as exc:
            if (exc.claim.resolved_by, exc.claim.status, exc.claim.resolution_note) != (
                who,
                outcome,
                note,
            ):
                raise
            return _replayed(exc.claim)
    return resolution


def _evidence(reference: str | None) -> dict[str, Any] | None:
    return {"reference": reference} if reference else None


def _replayed(claim: Claim) -> Resolution:
    step_status = Step.objects.values_list("status", flat=True).get(pk=claim.step_id)
    run_status = Run.objects.values_list("status", flat=True).get(pk=claim.run_id)
    return Resolution(claim, step_status, run_status, replayed=True)


# --- the set-aside rule of a decision over many claims ---------------------------------
# Why a bulk decision sets a claim aside (BulkSetAside.reason), for machines; the
# message says it in words.
LATE_RESULT = "late_result"  # failed: a fenced-off attempt returned from the effect
PROBE_COULD_NOT_TELL = "probe_could_not_tell"  # failed: the probe said unknown, or never answered
LATE_NOT_APPLIED = "late_not_applied"  # succeeded: a fenced-off attempt raised NotApplied
TAKEN = "taken"  # either: another operator is on it


@dataclass(frozen=True)
class BulkSetAside:
    """A claim a bulk decision left undecided, to be decided one by one: its evidence
    contradicts the chosen outcome, or another operator holds it (`reason`, one of
    LATE_RESULT, PROBE_COULD_NOT_TELL, LATE_NOT_APPLIED, TAKEN; `message` in words)."""

    claim_id: int
    claim_key: str
    reason: str
    message: str


class ClaimSetAside(ResolutionError):
    """A bulk decision's refusal of one claim (its batch item ends set aside)."""

    code = "claim_set_aside"

    def __init__(self, set_aside: BulkSetAside) -> None:
        super().__init__(set_aside.message)
        self.set_aside = set_aside


# A late error is its exception's text as the worker described it (execute._describe):
# the class's qualified name first. NotApplied's own (a subclass shows its own name and
# is not recognised: such a claim is not set aside, which repeats no effect).
_NOT_APPLIED = f"{NotApplied.__module__}.{NotApplied.__qualname__}"


def contradiction(outcome: str, evidence: Any) -> tuple[str, str] | None:
    """(reason, words) if the evidence kept on an unresolved claim contradicts deciding
    it as `outcome` in bulk; None if it agrees or says nothing either way. The rule
    (docs/operating.md#reconciliation, "Bulk decisions never repeat an effect"):

    - failed ("the effect did not happen": the step is retried, the effect done again)
      is contradicted by `late_result` (a fenced-off attempt returned from the step's
      function after its lease ended: the effect happened) and by `probe` (the probe
      answered unknown, raised, or never answered: nothing confirms it did not happen);
    - succeeded ("it happened": the run goes on without it) is contradicted by a
      `late_error` that is NotApplied (a fenced-off attempt said the effect did not
      happen).

    Not contradicting: a late error of any other exception (the attempt raised inside
    the effect: as uncertain as the claim itself), `effect_called: false` (an attempt
    that lost its lease before the effect: it says nothing of the attempt that made the
    claim unresolved), a reference. A definite probe answer is not kept on an
    unresolved claim: it resolves the claim itself (or, refused, is only logged)."""
    if not isinstance(evidence, dict):
        return None
    attempt = evidence.get("late_attempt")
    who = f"attempt {attempt}" if attempt is not None else "a fenced-off attempt"
    if outcome == ClaimStatus.FAILED:
        if "late_result" in evidence:
            return LATE_RESULT, (
                f"a late result says the effect happened: {who} returned "
                f"{json_short(evidence['late_result'], 120)} after its lease ended"
            )
        if "probe" in evidence:
            probe = evidence["probe"]
            reason = probe.get("reason") if isinstance(probe, dict) else None
            return PROBE_COULD_NOT_TELL, (
                "the probe could not tell whether the effect happened"
                + (f" ({reason})" if reason else "")
            )
    if outcome == ClaimStatus.SUCCEEDED:
        error = evidence.get("late_error")
        if isinstance(error, str) and (error + ":").startswith(_NOT_APPLIED + ":"):
            said = error.removeprefix(_NOT_APPLIED).removeprefix(":").strip()
            return LATE_NOT_APPLIED, (
                f"a late answer says the effect did not happen: {who} raised NotApplied"
                + (f" ({said})" if said else "")
                + " after its lease ended"
            )
    return None


def set_aside_of(
    claim_id: int, key: str, evidence: Any, outcome: str, take: ClaimTake | None
) -> BulkSetAside | None:
    """Why the claim is set aside from a bulk `outcome`, given its evidence and the live
    take by another operator it has, if any; None if it may be decided in bulk."""
    found = contradiction(outcome, evidence)
    if found is not None:
        reason, words = found
        undo = "repeat it" if outcome == ClaimStatus.FAILED else "lose it"
        return BulkSetAside(
            claim_id, key, reason, f"{words}; deciding it as {outcome} could {undo}"
        )
    if take is not None:
        until = timezone.localtime(take.expires_at).strftime("%H:%M")
        who = take.taken_by.get_username()
        return BulkSetAside(
            claim_id,
            key,
            TAKEN,
            f"{who} is on it (until {until}): theirs to decide, or yours once it ends",
        )
    return None


def takes_by_others(claim_ids: list[int], user: User) -> dict[int, ClaimTake]:
    """The live takes of these claims by anyone but `user`, by claim id (one query)."""
    takes = (
        ClaimTake.objects.select_related("taken_by")
        .filter(claim_id__in=claim_ids, expires_at__gt=Now())
        .exclude(taken_by_id=user.pk)
    )
    return {take.claim_id: take for take in takes}


def bulk_check(outcome: str, user: User) -> Callable[[int, Any], None]:
    """resolve_claim's precondition for a bulk decision: under the claim's lock, set
    it aside (ClaimSetAside) if its evidence contradicts `outcome` or another operator
    has taken it. Under that lock nothing can add evidence or take the claim before the
    resolution commits (a take reads the claim FOR SHARE first)."""

    def check(claim_id: int, evidence: Any) -> None:
        key = Claim.objects.values_list("key", flat=True).get(pk=claim_id)
        take = takes_by_others([claim_id], user).get(claim_id)
        aside = set_aside_of(claim_id, key, evidence, outcome, take)
        if aside is not None:
            raise ClaimSetAside(aside)

    return check


# --- check again -----------------------------------------------------------------------
def reprobe(*, claim_id: int, user: User) -> ProbeOutcome:
    """Run the claim's probe now (runs.engine.probe.reprobe_claim); if its answer
    resolved the claim, the resolution released the take. Refuses: NoProbe,
    ProbeNotDue, ProbeInFlight, ClaimAlreadyResolved, ClaimNotUnresolved, ClaimNotFound."""
    return reprobe_claim(claim_id=claim_id, actor=user)


__all__ = [
    "LATE_NOT_APPLIED",
    "LATE_RESULT",
    "PROBE_COULD_NOT_TELL",
    "TAKEN",
    "BulkSetAside",
    "ClaimAlreadyResolved",
    "ClaimNotFound",
    "ClaimNotUnresolved",
    "ClaimSetAside",
    "ClaimTakenByOther",
    "InvalidResolution",
    "NoProbe",
    "Preview",
    "ProbeError",
    "ProbeInFlight",
    "ProbeNotDue",
    "ProbeOutcome",
    "Resolution",
    "ResolutionError",
    "Take",
    "bulk_check",
    "contradiction",
    "parse_result",
    "release_claim",
    "release_on_resolution",
    "reprobe",
    "resolve",
    "resolve_claim",
    "set_aside_of",
    "take_claim",
    "takes_by_others",
    "validate_resolution",
]
