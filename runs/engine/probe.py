"""Probing unresolved claims (DESIGN.md §3).

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

An operator can ask again ("check again": reprobe_claim), synchronously, for a claim
whose probe is due; the probe's answer is applied exactly as the worker's would be,
by the same function (ask_probe), with the operator named in the note and events.
"""

from __future__ import annotations

import logging
import traceback
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import connection, transaction
from django.db.models import Q
from django.db.models.functions import Now

from runs import events, metrics
from runs.models import Claim, Run, Step
from runs.states import ClaimStatus
from runs.workflows import registry
from runs.workflows.definition import Context, ProbeResult, StepDef

from .complete import ensure_json
from .errors import EngineError
from .execute import dependency_results
from .resolve import (
    ClaimAlreadyResolved,
    ClaimNotFound,
    ClaimNotUnresolved,
    Resolution,
    ResolutionError,
    actor_name,
    resolve_claim,
)

log = logging.getLogger(__name__)

PROBE_ACTOR = "probe"


class ProbeError(EngineError):
    """An operator's "check again" was refused; nothing was asked or written."""


class NoProbe(ProbeError):
    """The claim's step declares no probe: only an operator can decide."""


class ProbeNotDue(ProbeError):
    """The claim's probe_after is still ahead (on the database's clock)."""

    def __init__(self, claim: Claim, until: datetime, seconds: float) -> None:
        super().__init__(
            f"claim {claim.key} cannot be probed before "
            f"{until.isoformat(timespec='seconds')} (in {seconds:.0f}s): its attempt's "
            "lease ended only recently, and a paused worker's effect may still land"
        )
        self.claim, self.until, self.seconds = claim, until, seconds


@dataclass(frozen=True)
class ProbeOutcome:
    """What a probe answered about a claim, and what came of it."""

    claim_id: int
    answer: str  # applied | not_applied | unknown
    evidence: dict[str, Any] = field(default_factory=dict)
    # A definite answer resolved the claim (actor `probe`)...
    resolution: Resolution | None = None
    # ...or was not applied, because a resolution came first (theirs stands): why.
    superseded: str = ""

    @property
    def word(self) -> str:
        return "superseded" if self.superseded else self.answer

    @property
    def summary(self) -> str:
        if self.superseded:
            return f"the probe found the effect {_said(self.answer)}, but {self.superseded}"
        if self.resolution is not None:
            return (
                f"the probe found the effect {_said(self.answer)}: the claim is resolved as "
                f"{self.resolution.claim.status}"
            )
        reason = self.evidence.get("reason")
        return "the probe could not tell" + (f": {reason}" if reason else "")


def _said(answer: str) -> str:
    return answer.replace("_", " ")


def probe_of(run: Run, step: Step) -> StepDef | None:
    """The step's definition if it declares a probe (registry lookup, no query)."""
    wf = registry.get(run.workflow, run.version)
    stepdef = wf.stepdef(step.name) if wf else None
    return stepdef if stepdef is not None and stepdef.probe is not None else None


def _due() -> Q:
    """No earlier than probe_after, on the database's clock (no probe_after: due)."""
    return Q(probe_after__isnull=True) | Q(probe_after__lte=Now())


def request_probes(*, run_id: uuid.UUID, step: Step, probe_after: Any) -> None:
    """Called in the transaction that made the step's claims unresolved: if the step
    has a probe, mark its claims and send a probe message after commit, due at
    `probe_after` (a database time or expression)."""
    run = Run.objects.only("workflow", "version").get(pk=run_id)
    if probe_of(run, step) is None:
        return
    ids = list(
        Claim.objects.filter(
            step=step, status=ClaimStatus.UNRESOLVED, probed_at__isnull=True
        ).values_list("id", flat=True)
    )
    if not ids:
        return
    Claim.objects.filter(pk__in=ids).update(probe_requested_at=Now(), probe_after=probe_after)
    for claim_id in ids:
        events.append_event(run.id, events.PROBE_REQUESTED, step_id=step.id, claim_id=claim_id)
    delays = seconds_until_probe(ids)
    transaction.on_commit(lambda: publish_probes(ids, delays))


def seconds_until_probe(claim_ids: list[int]) -> dict[int, float]:
    """For each claim, how long until its probe is due, on the database's clock."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, GREATEST(0, EXTRACT(EPOCH FROM probe_after - now()))::float "
            "FROM runs_claim WHERE id = ANY(%s) AND probe_after IS NOT NULL",
            [claim_ids],
        )
        return {int(pk): float(delay) for pk, delay in cursor.fetchall()}


def publish_probes(claim_ids: list[int], delays: dict[int, float] | None = None) -> None:
    from runs.tasks import probe_claim

    for claim_id in claim_ids:
        delay = (delays or {}).get(claim_id) or None
        try:
            probe_claim.apply_async((claim_id,), countdown=delay)
        except Exception:
            log.exception("could not publish probe of claim %s; the sweeper will retry", claim_id)


def probe_claim(*, claim_id: int) -> str:
    """The probe task's body: probe an unresolved claim once, when due. Returns a word
    for the logs: applied, not_applied, unknown, superseded, early or skipped."""
    claim = Claim.objects.select_related("run", "step").filter(pk=claim_id).first()
    if claim is None or claim.status != ClaimStatus.UNRESOLVED:
        return "skipped"
    stepdef = probe_of(claim.run, claim.step)
    if stepdef is None:
        return "skipped"
    # Compare-and-set: one probe per claim, even if its message is delivered twice,
    # and none before it is due.
    if not Claim.objects.filter(
        _due(), pk=claim_id, status=ClaimStatus.UNRESOLVED, probed_at__isnull=True
    ).update(probed_at=Now()):
        early = seconds_until_probe([claim_id]).get(claim_id, 0.0)
        if early > 0 and claim.probed_at is None:
            publish_probes([claim_id], {claim_id: early})
            return "early"
        return "skipped"
    word = ask_probe(claim, stepdef).word
    metrics.PROBES.labels(word).inc()
    return word


def reprobe_claim(*, claim_id: int, actor: AbstractBaseUser | str) -> ProbeOutcome:
    """Check again: run the step's probe now, for an operator, on an unresolved claim
    whose probe is due. A definite answer resolves the claim (actor `probe`, the note
    names who asked); `unknown` leaves it unresolved and is recorded with its evidence.

    Refuses (nothing asked, nothing written): ClaimNotFound, ClaimAlreadyResolved /
    ClaimNotUnresolved, NoProbe, ProbeNotDue (probe_after, the grace that lets a paused
    worker's effect land, is still ahead)."""
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
        # Not "once per claim" as for the task: an operator may ask again. Due, and
        # still unresolved, decided by the row; probed_at keeps a pending probe message
        # from asking a second time.
        if not Claim.objects.filter(_due(), pk=claim_id, status=ClaimStatus.UNRESOLVED).update(
            probed_at=Now()
        ):
            current = Claim.objects.get(pk=claim_id)
            _check_unresolved(current)
            seconds = seconds_until_probe([claim_id]).get(claim_id, 0.0)
            assert current.probe_after is not None
            raise ProbeNotDue(current, current.probe_after, seconds)
        events.append_event(
            claim.run_id,
            events.PROBE_REQUESTED,
            step_id=claim.step_id,
            claim_id=claim.id,
            key=claim.key,
            requested_by=who,
        )
    return ask_probe(claim, stepdef, requested_by=who)


def _check_unresolved(claim: Claim) -> None:
    if claim.status != ClaimStatus.UNRESOLVED:
        if claim.resolved_at is not None:
            raise ClaimAlreadyResolved(claim)
        raise ClaimNotUnresolved(claim, doing="probed")


def ask_probe(claim: Claim, stepdef: StepDef, *, requested_by: str = "") -> ProbeOutcome:
    """Ask the external system (outside any transaction: the probe is a remote read),
    then apply the answer: a definite one resolves the claim through resolve_claim, an
    unknown one (or a probe that raised) is recorded as probe_inconclusive."""
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
            log.info("probe of claim %s not applied: %s", claim.id, exc)
            return ProbeOutcome(claim.id, found.outcome, dict(found.evidence), superseded=str(exc))
        return ProbeOutcome(claim.id, found.outcome, dict(found.evidence), resolution)
    evidence = _json_or_repr(found.evidence)
    payload: dict[str, Any] = {"key": claim.key, "evidence": evidence}
    if requested_by:
        payload["requested_by"] = requested_by
    with transaction.atomic():
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
        events.append_event(run.id, events.PROBE_INCONCLUSIVE, step_id=step.id, **payload)
    return ProbeOutcome(claim.id, "unknown", evidence)


def _json_or_repr(evidence: dict[str, Any]) -> dict[str, Any]:
    try:
        return dict(ensure_json(evidence, "probe evidence"))
    except TypeError:
        return {key: repr(value) for key, value in evidence.items()}


__all__ = [
    "NoProbe",
    "ProbeError",
    "ProbeNotDue",
    "ProbeOutcome",
    "ask_probe",
    "probe_claim",
    "probe_of",
    "reprobe_claim",
]
