"""A step's marks, from its events, one function a kind of mark: a claim taken, a claim
resolved (and by whom), a probe that could not tell, a probe that disagreed with the
resolution, a late result, a refusal."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

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


Payload = Mapping[str, Any]


def step_mark(rows: Rows, lane: Lane, space: Space, step: Step, event: Event) -> None:
    mark = MARKS.get(event.type)
    if mark is None:
        return
    axis = rows.axis
    at = At(
        lane=lane,
        space=space,
        key=step.key,
        x=axis.x(event.created_at),
        cy=lane.mid,
        when=axis.when(event.created_at),
    )
    mark(at, event, event.payload or {})


def claim_taken(at: At, event: Event, payload: Payload) -> None:
    x, when = at.x, at.when
    retaken = " (taken over from an earlier attempt, same key)" if payload.get("retaken") else ""
    y = at.lane.bar_y - 1
    at.lane.markers.append(
        Marker(
            x=x,
            y=y,
            kind="claim",
            css="mk-claim",
            title=f"{at.key} attempt {event.attempt_number}: claim taken at {when}{retaken}\n"
            f"idempotency key: {payload.get('key', '?')}",
            shapes=[Shape("mk-fill", diamond(x, y, 4))],
        )
    )


def claim_resolved(at: At, event: Event, payload: Payload) -> None:
    lane, x, cy, when = at.lane, at.x, at.cy, at.when
    who = str(payload.get("actor") or "?")
    outcome = str(payload.get("outcome") or "?")
    by_probe = who == "probe"
    top, bottom = lane.y + 2, lane.y + lane.height - 3
    marker = Marker(
        x=x,
        y=cy,
        kind="resolution",
        css=f"mk-resolution mk-{outcome}" + (" mk-by-probe" if by_probe else ""),
        title=f"{at.key}: claim resolved as {outcome} by {who} at {when}\n"
        f"note: “{short(str(payload.get('note') or ''), 300)}”\n"
        f"key: {payload.get('key', '?')}"
        + (f"\nevidence: {json_short(payload['evidence'])}" if payload.get("evidence") else ""),
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


def probe_unknown(at: At, event: Event, payload: Payload) -> None:
    """A probe that answered "unknown", or gave up without an answer."""
    x, cy, when = at.x, at.cy, at.when
    said = (
        f"probe gave up at {when} after {payload.get('tries', '?')} tries without an answer"
        if event.type == ev.PROBE_GAVE_UP
        else f"probe answered “unknown” at {when}"
    )
    at.lane.markers.append(
        Marker(
            x=x,
            y=cy,
            kind="probe",
            css="mk-probe",
            title=f"{at.key}: {said}"
            + (f" (asked by {payload['requested_by']})" if payload.get("requested_by") else "")
            + f"\nevidence: {json_short(payload.get('evidence'))}",
            shapes=[Shape("mk-ring", circle(x, cy, 5.5)), Shape("mk-line", question(x, cy))],
        )
    )
    at.space.take(x - 6, x + 6)


def probe_disagrees(at: At, event: Event, payload: Payload) -> None:
    x, cy, when = at.x, at.cy, at.when
    answer = "applied" if payload.get("answer") == "applied" else "not applied"
    marker = Marker(
        x=x,
        y=cy,
        kind="probe-disagrees",
        css="mk-probe mk-probe-disagrees",
        title=f"{at.key}: probe found the effect {answer} at {when}"
        + (f" (asked by {payload['requested_by']})" if payload.get("requested_by") else "")
        + f"\nafter the claim was resolved as {payload.get('resolved_as')} by "
        f"{payload.get('resolved_by')}: the resolution stands"
        f"\nevidence: {json_short(payload.get('evidence'))}",
        shapes=[
            Shape("mk-ring", circle(x, cy, 5.5)),
            Shape("mk-bang", f"M{num(x)} {num(cy - 3)}v3.6M{num(x)} {num(cy + 2)}v.8"),
        ],
    )
    at.lane.markers.append(marker)
    at.space.take(x - 6, x + 6)
    marker.label = at.space.beside(
        x, cy + 3.5, ["probe disagrees", "disagrees"], gap=8, css="tl-label tl-late"
    )


def late_result(at: At, event: Event, payload: Payload) -> None:
    """A result that came after its claim became unresolved (kept as evidence), or
    after it was resolved (the resolution stands)."""
    x, cy, when = at.x, at.cy, at.when
    after = event.type == ev.LATE_RESULT_AFTER_RESOLUTION
    note = (
        f"\narrived after the claim was resolved as {payload.get('resolved_as')} by "
        f"{payload.get('resolved_by')}: the resolution stands"
        if after
        else "\nkept on the unresolved claim as evidence for the decision"
    )
    marker = Marker(
        x=x,
        y=cy,
        kind="late",
        css="mk-late" + (" mk-late-after" if after else ""),
        title=f"{at.key}: late result from attempt {event.attempt_number} at {when}"
        f"{note}\nevidence: {json_short(payload.get('evidence'))}",
        shapes=[
            Shape("mk-fill", triangle(x, cy, 6)),
            Shape("mk-bang", f"M{num(x)} {num(cy - 2.5)}v3.2"),
        ],
    )
    at.lane.markers.append(marker)
    at.space.take(x - 6, x + 6)
    marker.label = at.space.beside(
        x, cy + 3.5, ["late result", "late"], gap=8, css="tl-label tl-late"
    )


def refused(at: At, event: Event, payload: Payload) -> None:
    x, cy, when = at.x, at.cy, at.when
    at.lane.markers.append(
        Marker(
            x=x,
            y=cy,
            kind="refused",
            css="mk-refused",
            title=f"{at.key}: refused by worker {payload.get('worker', '?')} at {when}: "
            f"{payload.get('reason', '')}",
            shapes=[
                Shape("mk-ring", circle(x, cy, 5)),
                Shape("mk-line", f"M{num(x - 3.5)} {num(cy + 3.5)}l7 -7"),
            ],
        )
    )
    at.space.take(x - 6, x + 6)


# The step's events drawn as marks, by type (the others are drawn by the lanes).
MARKS: dict[str, Callable[[At, Event, Payload], None]] = {
    ev.CLAIM_TAKEN: claim_taken,
    ev.CLAIM_RESOLVED: claim_resolved,
    ev.PROBE_INCONCLUSIVE: probe_unknown,
    ev.PROBE_GAVE_UP: probe_unknown,
    ev.PROBE_CONTRADICTS_RESOLUTION: probe_disagrees,
    ev.CLAIM_EVIDENCE: late_result,
    ev.LATE_RESULT_AFTER_RESOLUTION: late_result,
    ev.STEP_REFUSED: refused,
}
