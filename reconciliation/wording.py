"""What the operator pages say about a claim, in words: a claim by its idempotency key
(shortened) and its step, never its database id; who and how long ago rather than ISO
timestamps; a time of day where a person waits for it ("at 14:33, in 28 min").

The engine's and the services' exception messages stay exact (the REST API and the logs
use them); the pages phrase the same facts from the exceptions' attributes.
"""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from runs.errors import ClaimAlreadyResolved, ClaimNotUnresolved, ProbeInFlight, ProbeNotDue
from runs.models import Claim
from runs.timefmt import humanize_delta

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
