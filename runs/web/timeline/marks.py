"""A step's marks, from its events, one function a kind of mark: a claim taken, a claim
resolved (and by whom), a probe that could not tell, a probe that disagreed with the
resolution, a late result, a refusal."""

from __future__ import annotations

from dataclasses import dataclass

from runs.models import Event, Step
from runs.pages.words import json_short, short
from runs.record import events as ev

from .model import Lane, Marker, Shape
from .placement import Space
from .rows import Rows
from .shapes import circle, diamond, flag, num, question, triangle


@dataclass(frozen=True)
class At:
    """Where one event of a step is marked: its lane (and the room left there for
    labels), the step's key, the event's x, the lane's middle, its time in words."""

    lane: Lane
    space: Space
    key: str
    x: float
    cy: float
    when: str


def step_mark(rows: Rows, lane: Lane, space: Space, step: Step, row: Event) -> None:
    """The step's event `row` as its mark, if it is of a kind drawn as a mark (the
    lanes draw the others). None that the catalogue cannot read (rows.events)."""
    event = rows.event(row)
    if event is None:
        return
    axis = rows.axis
    at = At(
        lane=lane,
        space=space,
        key=step.key,
        x=axis.x(row.created_at),
        cy=lane.mid,
        when=axis.when(row.created_at),
    )
    match event:
        case ev.ClaimTaken():
            claim_taken(at, row, event)
        case ev.ClaimResolved():
            claim_resolved(at, event)
        case ev.ProbeInconclusive() | ev.ProbeGaveUp():
            probe_unknown(at, event)
        case ev.ProbeContradictsResolution():
            probe_disagrees(at, event)
        case ev.ClaimEvidence() | ev.LateResultAfterResolution():
            late_result(at, row, event)
        case ev.StepRefused():
            refused(at, event)
        case ev.StepWaitingForSlot():
            waiting_for_slot(at, event)
        case ev.AttemptTimedOut():
            timed_out(at, row, event)


def claim_taken(at: At, row: Event, e: ev.ClaimTaken) -> None:
    x, when = at.x, at.when
    retaken = " (taken over from an earlier attempt, same key)" if e.retaken else ""
    y = at.lane.bar_y - 1
    at.lane.markers.append(
        Marker(
            x=x,
            y=y,
            kind="claim",
            css="mk-claim",
            title=f"{at.key} attempt {row.attempt_number}: claim taken at {when}{retaken}\n"
            f"idempotency key: {e.key}",
            shapes=[Shape("mk-fill", diamond(x, y, 4))],
        )
    )


def claim_resolved(at: At, e: ev.ClaimResolved) -> None:
    lane, x, cy, when = at.lane, at.x, at.cy, at.when
    who, outcome = e.actor, e.outcome
    by_probe = who == "probe"
    top, bottom = lane.y + 2, lane.y + lane.height - 3
    marker = Marker(
        x=x,
        y=cy,
        kind="resolution",
        css=f"mk-resolution mk-{outcome}" + (" mk-by-probe" if by_probe else ""),
        title=f"{at.key}: claim resolved as {outcome} by {who} at {when}\n"
        f"note: “{short(e.note or '', 300)}”\n"
        f"key: {e.key}" + (f"\nevidence: {json_short(e.evidence)}" if e.evidence else ""),
        shapes=flag(x, top, bottom),
    )
    lane.markers.append(marker)
    at.space.take(x - 1, x + 10)
    texts = (
        [f"probe: {'applied' if outcome == 'succeeded' else 'not applied'}", "probe"]
        if by_probe
        else [f"{outcome} by {short(who, 20)}", f"by {short(who, 12)}", outcome]
    )
    marker.label = at.space.beside(
        x + 5, cy + 3.5, texts, gap=8, css=f"tl-label tl-resolution tl-{outcome}"
    )


def _point_mark(
    at: At,
    *,
    kind: str,
    css: str,
    title: str,
    shapes: list[Shape],
    label: list[str] | None = None,
    label_css: str = "",
) -> None:
    """A mark on the lane's middle at the event's x, the room it takes in the lane, and
    its label beside it when `label` (its texts, longest first) fits."""
    x, cy = at.x, at.cy
    marker = Marker(x=x, y=cy, kind=kind, css=css, title=title, shapes=shapes)
    at.lane.markers.append(marker)
    at.space.take(x - 6, x + 6)
    if label:
        marker.label = at.space.beside(x, cy + 3.5, label, gap=8, css=label_css)


def _asked_by(requested_by: str) -> str:
    return f" (asked by {requested_by})" if requested_by else ""


def probe_unknown(at: At, e: ev.ProbeInconclusive | ev.ProbeGaveUp) -> None:
    """A probe that answered "unknown", or gave up without an answer."""
    x, cy, when = at.x, at.cy, at.when
    if isinstance(e, ev.ProbeGaveUp):
        said = f"probe gave up at {when} after {e.tries} tries without an answer"
    else:
        said = f"probe answered “unknown” at {when}" + _asked_by(e.requested_by)
    _point_mark(
        at,
        kind="probe",
        css="mk-probe",
        title=f"{at.key}: {said}\nevidence: {json_short(e.evidence)}",
        shapes=[Shape("mk-ring", circle(x, cy, 5.5)), Shape("mk-line", question(x, cy))],
    )


def probe_disagrees(at: At, e: ev.ProbeContradictsResolution) -> None:
    x, cy, when = at.x, at.cy, at.when
    answer = "applied" if e.answer == "applied" else "not applied"
    _point_mark(
        at,
        kind="probe-disagrees",
        css="mk-probe mk-probe-disagrees",
        title=f"{at.key}: probe found the effect {answer} at {when}"
        + _asked_by(e.requested_by)
        + f"\nafter the claim was resolved as {e.resolved_as} by {e.resolved_by}: "
        f"the resolution stands\nevidence: {json_short(e.evidence)}",
        shapes=[
            Shape("mk-ring", circle(x, cy, 5.5)),
            Shape("mk-bang", f"M{num(x)} {num(cy - 3)}v3.6M{num(x)} {num(cy + 2)}v.8"),
        ],
        label=["probe disagrees", "disagrees"],
        label_css="tl-label tl-late",
    )


def late_result(at: At, row: Event, e: ev.ClaimEvidence | ev.LateResultAfterResolution) -> None:
    """A result that came after its claim became unresolved (kept as evidence), or
    after it was resolved (the resolution stands)."""
    x, cy, when = at.x, at.cy, at.when
    if isinstance(e, ev.LateResultAfterResolution):
        css = "mk-late mk-late-after"
        note = (
            f"arrived after the claim was resolved as {e.resolved_as} by {e.resolved_by}: "
            "the resolution stands"
        )
    else:
        css, note = "mk-late", "kept on the unresolved claim as evidence for the decision"
    _point_mark(
        at,
        kind="late",
        css=css,
        title=f"{at.key}: late result from attempt {row.attempt_number} at {when}\n"
        f"{note}\nevidence: {json_short(e.evidence)}",
        shapes=[
            Shape("mk-fill", triangle(x, cy, 6)),
            Shape("mk-bang", f"M{num(x)} {num(cy - 2.5)}v3.2"),
        ],
        label=["late result", "late"],
        label_css="tl-label tl-late",
    )


def refused(at: At, e: ev.StepRefused) -> None:
    x, cy, when = at.x, at.cy, at.when
    _point_mark(
        at,
        kind="refused",
        css="mk-refused",
        title=f"{at.key}: refused by worker {e.worker} at {when}: {e.reason}",
        shapes=[
            Shape("mk-ring", circle(x, cy, 5)),
            Shape("mk-line", f"M{num(x - 3.5)} {num(cy + 3.5)}l7 -7"),
        ],
    )


def waiting_for_slot(at: At, e: ev.StepWaitingForSlot) -> None:
    """A start turned away by a full limit or a key hold: an hourglass-like ring."""
    x, cy, when = at.x, at.cy, at.when
    why = (
        f"held while {e.in_use} claim(s) on {e.scope.removeprefix('hold ')} are unresolved"
        if e.of is None
        else f"waiting for a slot of {e.scope} ({e.in_use} of {e.of} in use)"
    )
    _point_mark(
        at,
        kind="waiting-for-slot",
        css="mk-refused",
        title=f"{at.key}: {why}, at {when}",
        shapes=[
            Shape("mk-ring", circle(x, cy, 5)),
            Shape("mk-line", f"M{num(x - 3)} {num(cy)}h6"),
        ],
    )


def timed_out(at: At, row: Event, e: ev.AttemptTimedOut) -> None:
    """An attempt stopped at its timeout (docs/authoring.md#timeouts): a clock face."""
    x, cy, when = at.x, at.cy, at.when
    how = "; its call did not stop, so its worker process was replaced" if e.replaced else ""
    _point_mark(
        at,
        kind="timed-out",
        css="mk-timed-out",
        title=f"{at.key} attempt {row.attempt_number}: timed out after {e.seconds:g} s "
        f"at {when}{how}",
        shapes=[
            Shape("mk-ring", circle(x, cy, 5)),
            Shape("mk-line", f"M{num(x)} {num(cy - 3)}v3h2.5"),
        ],
    )
