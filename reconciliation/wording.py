"""What the operator pages say about a claim, in words: a claim by its idempotency key
(shortened) and its step, never its database id; who and how long ago rather than ISO
timestamps; a time of day where a person waits for it ("at 14:33, in 28 min").

The engine's and the services' exception messages stay exact (the REST API and the logs
use them); the pages phrase the same facts from the exceptions' attributes. What a
decision would do (the engine's Preview, facts only) is said here too: only the pages
show it (the API has no resolution preview).
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from runs.errors import ClaimAlreadyResolved, ClaimNotUnresolved, ProbeInFlight, ProbeNotDue
from runs.models import Claim
from runs.pages.timefmt import humanize_delta
from runs.resolutions import (
    COMPENSATES,
    FAILS_RUN,
    FINISHES_RUN,
    NOT_UNRESOLVED,
    RECORDED_ONLY,
    RESUMES,
    RETRIES,
    Preview,
)

from .services import ClaimTakenByOther


def short_key(key: str) -> str:
    """An idempotency key short enough for a sentence: a run's id at its head (as in
    "<run id>/merge@1") is cut to 8 characters, the rest kept."""
    head, sep, tail = key.partition("/")
    if sep and len(head) > 12:
        key = f"{head[:8]}…/{tail}"
    return key if len(key) <= 60 else f"{key[:59]}…"


def claim_label(key: str, step: str) -> str:
    return f"claim {short_key(key)} (step {step})"


def label_of(claim: Claim) -> str:
    return claim_label(claim.key, claim.step.key)


def ago(moment: datetime | None) -> str:
    """ "2 min ago" (or "in 28 min" for a time ahead; "just now" for the last seconds)."""
    if moment is None:
        return "at an unknown time"
    delta = timezone.now() - moment
    return "just now" if 0 <= delta.total_seconds() < 5 else humanize_delta(delta)


def clock(moment: datetime) -> str:
    """The time of day, local, and how far ahead: "14:33 (in 28 min)"."""
    return f"{timezone.localtime(moment):%H:%M} ({ago(moment)})"


def capfirst(text: str) -> str:
    return text[:1].upper() + text[1:]


def resolved(claim: Claim) -> str:
    """ "resolved as failed by bob 2 min ago: “bob checked the host”" """
    note = f": “{claim.resolution_note}”" if claim.resolution_note else ""
    return f"resolved as {claim.status} by {claim.resolved_by} {ago(claim.resolved_at)}{note}"


def taken_by_other(exc: ClaimTakenByOther, label: str) -> str:
    return (
        f"{capfirst(label)} was taken by {exc.taken_by} {ago(exc.taken_at)}; "
        f"you can take it over at {clock(exc.expires_at)}."
    )


def refusal(exc: Exception, claim: Claim | None = None) -> str:
    """Why an action on a claim was refused, as a sentence."""
    claim = getattr(exc, "claim", None) or claim
    if claim is None:
        return capfirst(str(exc)).rstrip(".") + "."
    label = label_of(claim)
    if isinstance(exc, ClaimAlreadyResolved):
        return f"{capfirst(label)} was already {resolved(claim)}."
    if isinstance(exc, ClaimNotUnresolved) and claim.resolved_at:
        return f"{capfirst(label)} is no longer unresolved: it was {resolved(claim)}."
    if isinstance(exc, ClaimTakenByOther):
        return taken_by_other(exc, label)
    if isinstance(exc, ProbeNotDue):
        return (
            f"{capfirst(label)} cannot be probed before {clock(exc.until)}: its attempt's "
            "lease ended only recently, and a paused worker's effect may still land."
        )
    if isinstance(exc, ProbeInFlight):
        return (
            f"{capfirst(label)} is being probed; check again once that probe has answered, "
            f"or after {clock(exc.until)} if it never does."
        )
    message = str(exc).replace(f"claim {claim.key}", label)
    return capfirst(message).rstrip(".") + "."


# --- what a decision would do ---------------------------------------------------------
def preview_summary(preview: Preview) -> str:
    """One sentence (lower case, no full stop) for what resolving the claim with the
    preview's outcome would do: "step merge retried: attempt 2 of 3, new claim …"."""
    step, because = preview.step, preview.because
    if preview.action == NOT_UNRESOLVED:
        if because == Preview.Because.DECIDED_EARLIER:
            return "already decided by an earlier entry of this list"
        if preview.resolved_at is None:
            return f"the claim is {preview.claim_status}, not unresolved"
        when = preview.resolved_at.isoformat(timespec="seconds")
        return f"already resolved as {preview.claim_status} by {preview.resolved_by} at {when}"
    if preview.action == RECORDED_ONLY:
        if because == Preview.Because.STEP_GOES_ON:
            return f"recorded only: step {step} is {preview.step_status} and goes on by itself"
        return f"recorded only: the run already {preview.run_was}; nothing is scheduled"
    if preview.action == COMPENSATES:
        return (
            f"the run already {preview.run_was}: step {step} succeeds and its compensation "
            f"{preview.compensation} runs (the run compensates, then ends {preview.run_was} "
            "again)"
        )
    if preview.action == FINISHES_RUN:
        return f"step {step} succeeds, and so does the run: it was its last step"
    if preview.action == RESUMES:
        return "; ".join(_goes_on(preview)) + _run_goes_on(preview)
    if preview.action == RETRIES:
        return (
            f"step {step} retried: attempt {preview.attempt} of {preview.max_attempts}, "
            f"new claim {preview.next_claim_key}"
        ) + _run_goes_on(preview)
    if preview.action == FAILS_RUN:
        return (
            f"step {step} fails and the run fails: no attempts remain "
            f"({preview.attempts_used} of {preview.max_attempts} used)"
        )
    # refused
    if because == Preview.Because.WORKFLOW_UNKNOWN:
        cannot = (
            "tell whether a compensation runs"
            if preview.run_finished
            else "queue the steps that follow"
        )
        return (
            f"refused: this process does not know workflow {preview.workflow} "
            f"v{preview.version}, so it cannot {cannot}"
        )
    return f"no claim with id {preview.claim_id}"


def consequence(preview: Preview) -> str:
    """What deciding the claim does, without what differs from claim to claim (its
    key, its run's id, a retry's new key): a decision over an incident counts its
    claims by this sentence ("398 claims: step merge retried: attempt 2 of 3; the run
    resumes")."""
    if preview.action == NOT_UNRESOLVED:
        if preview.resolved_at is None:
            return f"left out: the claim is {preview.claim_status}, not unresolved"
        return f"left out: already resolved as {preview.claim_status} by {preview.resolved_by}"
    if preview.action == RETRIES:
        return (
            f"step {preview.step} retried: attempt {preview.attempt} of {preview.max_attempts}"
            + _run_goes_on(preview)
        )
    return preview_summary(preview)


def _goes_on(preview: Preview) -> list[str]:
    """What a success sets going: the steps it makes ready, expands or leaves waiting."""
    ready, expands, waiting = preview.ready, preview.expands, preview.waiting
    parts = [f"step {preview.step} succeeds"]
    if ready:
        parts.append(f"{', '.join(ready)} {'becomes' if len(ready) == 1 else 'become'} ready")
    if expands:
        parts.append(f"{', '.join(expands)} would expand into batches")
    if waiting:
        verb = "waits" if len(waiting) == 1 else "wait"
        parts.append(f"{', '.join(waiting)} still {verb} on other steps")
    if not (ready or expands or waiting):
        parts.append("no step waits on it")
    return parts


def _run_goes_on(preview: Preview) -> str:
    if preview.resumes:
        return "; the run resumes"
    if preview.other_unresolved > 0:
        return f"; the run still waits on {preview.other_unresolved} other unresolved claim(s)"
    return ""
