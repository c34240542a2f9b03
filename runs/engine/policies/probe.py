"""Probing unresolved claims (docs/architecture.md#effect-kinds).

When a guarded step's claim becomes unresolved and the step declares `probe(ctx)`, a
worker asks the external system, read-only, what happened. A definite answer resolves
the claim through the same service an operator uses (actor `probe`, evidence
recorded); an unknown answer, or a probe that raises, leaves it for the operator.

A probe runs no earlier than the claim's `probe_after`: for a crashed attempt, its
lease plus RUNS_PROBE_GRACE_SECONDS. Its worker may only be paused (GC, a frozen VM)
between its last lease check and the external call; asking the external system too
early could answer `not_applied`, retry the effect, and then see the paused original
land it too. A probe message that arrives early (Celery's countdown runs on the
worker's clock) is sent again with the delay that remains on the database's clock.

A probe holds its claim under a lease, as an attempt holds its step: the
compare-and-set that lets a probe ask sets probed_at and probe_lease_expires_at
(RUNS_PROBE_LEASE_SECONDS on the database's clock) and counts the try; the answer, once
applied, clears the lease. A probe whose worker died (or stalled past its lease) is sent
again by the sweeper, up to RUNS_PROBE_MAX_TRIES tries; then the claim is left to the
operator, with evidence (and a probe_gave_up event) saying its probe never answered.

A definite answer that comes after someone resolved the claim the other way (an
operator decided while the probe was asking) changes nothing: the resolution is final.
It is recorded as a `probe_contradicts_resolution` event, with the probe's evidence,
which the reconciliation pages show beside the resolution (the claim's own evidence
cannot be amended once resolved). An answer that agrees is only logged.

An operator can ask again ("check again": reprobe_claim), synchronously, for a claim
whose probe is due and that no other probe holds; the probe's answer is applied exactly
as the worker's would be, by the same function (ask_probe), with the operator named in
the note and events. Its probe takes the same lease, but its tries are not counted
(nor capped): the cap bounds what the sweeper does on its own.
"""

from __future__ import annotations

import logging
import traceback
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models.functions import Now

from runs import sql
from runs.engine.core.jsonvalues import ensure_json
from runs.engine.core.locks import lock_run
from runs.engine.core.publish import publish_probes
from runs.engine.state.results import dependency_results
from runs.engine.state.unresolved import probe_of, seconds_until_probe
from runs.errors import (
    ClaimAlreadyResolved,
    ClaimNotFound,
    ClaimNotUnresolved,
    NoProbe,
    ProbeError,
    ProbeInFlight,
    ProbeNotDue,
    ResolutionError,
)
from runs.models import Claim
from runs.ops import metrics
from runs.principals import actor_name
from runs.record import events
from runs.states import ClaimStatus
from runs.workflows import Context, ProbeResult, StepDef

from .resolve import Resolution, resolve_claim

SQL = sql.load(__file__)

log = logging.getLogger(__name__)

PROBE_ACTOR = "probe"


@dataclass(frozen=True)
class ProbeOutcome:
    """What a probe answered about a claim, and what came of it."""

    claim_id: int
    answer: str  # applied | not_applied | unknown
    evidence: dict[str, Any] = field(default_factory=dict)
    # A definite answer resolved the claim (actor `probe`)...
    resolution: Resolution | None = None
    # ...or was not applied, because a resolution came first (theirs stands): why;
    # and whether that resolution said the opposite (recorded as an event).
    superseded: str = ""
    contradicts: bool = False

    @property
    def word(self) -> str:
        return "superseded" if self.superseded else self.answer

    @property
    def summary(self) -> str:
        if self.superseded:
            said = f"the probe found the effect {_said(self.answer)}, but {self.superseded}"
            if self.contradicts:
                said += " (the disagreement is recorded in the run's history)"
            return said
        if self.resolution is not None:
            return (
                f"the probe found the effect {_said(self.answer)}: the claim is resolved as "
                f"{self.resolution.claim.status}"
            )
        reason = self.evidence.get("reason")
        return "the probe could not tell" + (f": {reason}" if reason else "")


def _said(answer: str) -> str:
    return answer.replace("_", " ")


def _take(claim_id: int, *, by_operator: bool = False) -> datetime | None:
    """Take the claim for one probe, under a lease: the compare-and-set of probe.sql
    (take_for_worker: never probed or its lease passed, tries left; take_for_operator:
    no probe holds it). Its probed_at, the probe's token; None if it is not to be
    probed now."""
    params: dict[str, Any] = {
        "claim": claim_id,
        "unresolved": ClaimStatus.UNRESOLVED,
        "lease": float(settings.RUNS_PROBE_LEASE_SECONDS),
        "counted": 0 if by_operator else 1,
        "max_tries": int(settings.RUNS_PROBE_MAX_TRIES),
    }
    with connection.cursor() as cursor:
        cursor.execute(SQL["take_for_operator" if by_operator else "take_for_worker"], params)
        row = cursor.fetchone()
    return None if row is None else row[0]


def _release(claim_id: int, taken: datetime | None) -> None:
    """The probe that took the claim at `taken` has answered: no probe holds it now
    (unless a later one took it over after this one's lease passed)."""
    if taken is not None:
        Claim.objects.filter(pk=claim_id, probed_at=taken).update(probe_lease_expires_at=None)


def _lock_run(run_id: uuid.UUID, *, skip_locked: bool = False) -> bool:
    """The run's row first (locks.py), before the claim and before the event that needs
    the row anyway. False if skipped (or gone)."""
    return lock_run(run_id, skip_locked=skip_locked) is not None


def probe_claim(*, claim_id: int) -> str:
    """The probe task's body: probe an unresolved claim once, when due. Returns a word
    for the logs: applied, not_applied, unknown, superseded, early or skipped."""
    claim = Claim.objects.select_related("run", "step").filter(pk=claim_id).first()
    if claim is None or claim.status != ClaimStatus.UNRESOLVED:
        return "skipped"
    stepdef = probe_of(claim.run, claim.step)
    if stepdef is None:
        return "skipped"
    # Compare-and-set: one probe at a time per claim, even if its message is delivered
    # twice, none before it is due, and another only once a probe's lease has passed
    # without an answer (while tries are left).
    taken = _take(claim_id)
    if taken is None:
        early = seconds_until_probe([claim_id]).get(claim_id, 0.0)
        if early > 0 and claim.probed_at is None:
            publish_probes([claim_id], {claim_id: early})
            return "early"
        return "skipped"
    word = ask_probe(claim, stepdef, taken=taken).word
    metrics.PROBES.labels(word).inc()
    return word


def reprobe_claim(*, claim_id: int, actor: AbstractBaseUser | str) -> ProbeOutcome:
    """Check again: run the step's probe now, for an operator, on an unresolved claim
    whose probe is due. A definite answer resolves the claim (actor `probe`, the note
    names who asked); `unknown` leaves it unresolved and is recorded with its evidence.

    Refuses (nothing asked, nothing written): ClaimNotFound, ClaimAlreadyResolved /
    ClaimNotUnresolved, NoProbe, ProbeNotDue (probe_after, the grace that lets a paused
    worker's effect land, is still ahead), ProbeInFlight (another probe holds the claim:
    its answer is on the way, and two probes asking at once would race to resolve)."""
    who = actor_name(actor)
    claim = Claim.objects.select_related("run", "step").filter(pk=claim_id).first()
    if claim is None:
        raise ClaimNotFound(f"no claim with id {claim_id}")
    _check_unresolved(claim)
    stepdef = probe_of(claim.run, claim.step)
    if stepdef is None:
        raise NoProbe(
            f"step {claim.step.key} of {claim.run.workflow} v{claim.run.version} declares "
            "no probe: decide from the evidence"
        )
    with transaction.atomic():
        _lock_run(claim.run_id)
        # Not "once per claim" as for the task: an operator may ask again. Due, still
        # unresolved and held by no other probe, decided by the row; probed_at keeps a
        # pending probe message from asking a second time.
        taken = _take(claim_id, by_operator=True)
        if taken is None:
            current = Claim.objects.get(pk=claim_id)
            _check_unresolved(current)
            _refuse(current)
        events.append_event(
            claim.run_id,
            events.ProbeRequested(claim_id=claim.id, key=claim.key, requested_by=who),
            step_id=claim.step_id,
        )
    return ask_probe(claim, stepdef, requested_by=who, taken=taken)


def _refuse(claim: Claim) -> None:
    """Why an unresolved claim could not be taken for a probe: raise it."""
    with connection.cursor() as cursor:
        cursor.execute(SQL["lease_left"], {"claim": claim.id})
        row = cursor.fetchone()
    held = row[0] if row is not None else None
    if claim.probe_lease_expires_at is not None and held is not None and held > 0:
        raise ProbeInFlight(claim, claim.probe_lease_expires_at, float(held))
    if claim.probe_after is not None:
        seconds = seconds_until_probe([claim.id]).get(claim.id, 0.0)
        raise ProbeNotDue(claim, claim.probe_after, seconds)
    raise ProbeError(f"claim {claim.key} could not be probed just now: check again")


def _check_unresolved(claim: Claim) -> None:
    if claim.status != ClaimStatus.UNRESOLVED:
        if claim.resolved_at is not None:
            raise ClaimAlreadyResolved(claim)
        raise ClaimNotUnresolved(claim, doing="probed")


def ask_probe(
    claim: Claim, stepdef: StepDef, *, requested_by: str = "", taken: datetime | None = None
) -> ProbeOutcome:
    """Ask the external system (outside any transaction: the probe is a remote read),
    then apply the answer: a definite one resolves the claim through resolve_claim, an
    unknown one (or a probe that raised) is recorded as probe_inconclusive. Either way
    the probe's lease, taken at `taken` (its probed_at), is cleared with the answer."""
    run, step = claim.run, claim.step
    assert stepdef.probe is not None
    ctx = Context(
        run_id=str(run.id),
        step_name=step.name,
        input=dict(run.input),
        results=dependency_results(run.id, stepdef),
        idempotency_key=claim.key,
        attempt=step.attempts,
        heartbeat=lambda: None,
    )
    try:
        found = stepdef.probe(ctx)
        if not isinstance(found, ProbeResult):
            raise TypeError(f"probe returned {type(found).__name__}, not a ProbeResult")
    except Exception as exc:
        found = ProbeResult.unknown(
            "probe raised", error="".join(traceback.format_exception_only(type(exc), exc)).strip()
        )
    if found.outcome in ("applied", "not_applied"):
        outcome = ClaimStatus.SUCCEEDED if found.outcome == "applied" else ClaimStatus.FAILED
        note = f"probe found the effect {_said(found.outcome)}"
        if requested_by:
            note += f" (checked again at the request of {requested_by})"
        try:
            resolution = resolve_claim(
                claim.id,
                outcome,
                actor=PROBE_ACTOR,
                note=note,
                result=found.result if outcome == ClaimStatus.SUCCEEDED else None,
                evidence=found.evidence,
            )
        except ResolutionError as exc:  # someone was faster: theirs stands
            contradicts = _contradiction(claim, found, requested_by)
            if not contradicts:
                log.info("probe of claim %s not applied: %s", claim.id, exc)
            return ProbeOutcome(
                claim.id,
                found.outcome,
                dict(found.evidence),
                superseded=str(exc),
                contradicts=contradicts,
            )
        return ProbeOutcome(claim.id, found.outcome, dict(found.evidence), resolution)
    evidence = _json_or_repr(found.evidence)
    inconclusive = events.ProbeInconclusive(
        key=claim.key, evidence=evidence, requested_by=requested_by or ""
    )
    with transaction.atomic():
        _lock_run(run.id)
        # The latest inconclusive answer stays on the claim, under "probe", for the
        # operator's queue (a late result may be adding evidence too: lock, merge).
        row = (
            Claim.objects.select_for_update()
            .filter(pk=claim.id, status=ClaimStatus.UNRESOLVED)
            .values("evidence")
            .first()
        )
        if row is not None:
            merged = {**(row["evidence"] or {}), "probe": evidence}
            Claim.objects.filter(pk=claim.id).update(evidence=merged)
            _release(claim.id, taken)
        events.append_event(run.id, inconclusive, step_id=step.id)
    return ProbeOutcome(claim.id, "unknown", evidence)


def _contradiction(claim: Claim, found: ProbeResult, requested_by: str) -> bool:
    """A definite answer for a claim that was resolved meanwhile: if the resolution says
    the opposite, record the disagreement (a probe_contradicts_resolution event with the
    answer, its result and evidence, and the resolution it contradicts) in one
    transaction, the run's row first (locks.py). True if recorded. The resolution is
    final and stays; a resolved claim's row cannot be written, so the event is where
    the answer is kept."""
    said = ClaimStatus.SUCCEEDED if found.outcome == "applied" else ClaimStatus.FAILED
    with transaction.atomic():
        _lock_run(claim.run_id)
        row = (
            Claim.objects.filter(pk=claim.id)
            .values("key", "status", "resolved_by", "resolved_at")
            .first()
        )
        if row is None or row["resolved_at"] is None or row["status"] == said:
            return False
        contradiction = events.ProbeContradictsResolution(
            key=row["key"],
            answer=found.outcome,
            # A result only when the effect was applied; None is a result too.
            result=_value_or_repr(found.result) if found.outcome == "applied" else events.ABSENT,
            evidence=_json_or_repr(found.evidence),
            resolved_as=row["status"],
            resolved_by=row["resolved_by"],
            requested_by=requested_by or "",
        )
        events.append_event(claim.run_id, contradiction, step_id=claim.step_id)
    log.warning(
        "probe of claim %s found the effect %s after it was resolved as %s by %s: "
        "the resolution stands; the disagreement is recorded",
        row["key"],
        _said(found.outcome),
        row["status"],
        row["resolved_by"],
    )
    return True


def give_up_probe(claim_id: int) -> bool:
    """The sweeper's end of a probe that never answered: its last lease has passed and
    its tries are used up. The claim stays unresolved, for the operator, with evidence
    (and an event) saying so. False if the claim moved on meanwhile, or another session
    holds its run or its claim (the next sweep looks again)."""
    found = Claim.objects.filter(pk=claim_id).values_list("run_id", "step_id", "key").first()
    if found is None:
        return False
    run_id, step_id, key = found
    with transaction.atomic():
        if not _lock_run(run_id, skip_locked=True):
            return False
        row = (
            Claim.objects.select_for_update(skip_locked=True)
            .filter(
                pk=claim_id,
                status=ClaimStatus.UNRESOLVED,
                probe_lease_expires_at__lt=Now(),
                probe_tries__gte=settings.RUNS_PROBE_MAX_TRIES,
            )
            .values("evidence", "probe_tries")
            .first()
        )
        if row is None:
            return False
        tries = int(row["probe_tries"])
        evidence = {
            "reason": f"the probe never completed: {tries} tries, each ended by its lease "
            "without an answer (its worker died or stalled)",
            "tries": tries,
        }
        Claim.objects.filter(pk=claim_id).update(
            evidence={**(row["evidence"] or {}), "probe": evidence}, probe_lease_expires_at=None
        )
        events.append_event(
            run_id, events.ProbeGaveUp(key=key, tries=tries, evidence=evidence), step_id=step_id
        )
    log.warning("probe of claim %s gave up after %s tries without an answer", key, tries)
    metrics.PROBES.labels("gave_up").inc()
    return True


def _value_or_repr(value: Any) -> Any:
    try:
        return ensure_json(value, "probe result")
    except TypeError:
        return repr(value)


def _json_or_repr(evidence: dict[str, Any]) -> dict[str, Any]:
    try:
        return dict(ensure_json(evidence, "probe evidence"))
    except TypeError:
        return {key: repr(value) for key, value in evidence.items()}


__all__ = [
    "ProbeOutcome",
    "ask_probe",
    "give_up_probe",
    "probe_claim",
    "reprobe_claim",
]
