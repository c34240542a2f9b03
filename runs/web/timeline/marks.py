"""A step's marks, from its events: a claim taken, a claim resolved (and by whom), a
probe that could not tell, a probe that disagreed with the resolution, a late result,
a refusal."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from runs import events as ev
from runs.models import Event, Step

from .model import Lane, Marker, Shape
from .placement import Space
from .rows import Rows
from .shapes import circle, diamond, flag, num, question, triangle
from .words import json_short, short


def step_mark(
    rows: Rows, lane: Lane, space: Space, step: Step, event: Event, taken: Mapping[Any, Event]
) -> None:
    axis = rows.axis
    x, cy, payload = axis.x(event.created_at), lane.mid, event.payload or {}
    when = axis.when(event.created_at)
    if event.type == ev.CLAIM_TAKEN:
        retaken = (
            " (taken over from an earlier attempt, same key)" if payload.get("retaken") else ""
        )
        y = lane.bar_y - 1
        lane.markers.append(
            Marker(
                x=x,
                y=y,
                kind="claim",
                css="mk-claim",
                title=f"{step.key} attempt {event.attempt_number}: claim taken at {when}{retaken}\n"
                f"idempotency key: {payload.get('key', '?')}",
                shapes=[Shape("mk-fill", diamond(x, y, 4))],
            )
        )
    elif event.type == ev.CLAIM_RESOLVED:
        who = str(payload.get("actor") or "?")
        outcome = str(payload.get("outcome") or "?")
        by_probe = who == "probe"
        top, bottom = lane.y + 2, lane.y + lane.height - 3
        lane.markers.append(
            Marker(
                x=x,
                y=cy,
                kind="resolution",
                css=f"mk-resolution mk-{outcome}" + (" mk-by-probe" if by_probe else ""),
                title=f"{step.key}: claim resolved as {outcome} by {who} at {when}\n"
                f"note: “{short(str(payload.get('note') or ''), 300)}”\n"
                f"key: {payload.get('key', '?')}"
                + (
                    f"\nevidence: {json_short(payload['evidence'])}"
                    if payload.get("evidence")
                    else ""
                ),
                shapes=flag(x, top, bottom),
            )
        )
        space.take(x - 1, x + 10)
        texts = (
            [f"probe: {'applied' if outcome == 'succeeded' else 'not applied'}", "probe"]
            if by_probe
            else [f"{outcome} by {short(who, 20)}", f"by {short(who, 12)}", outcome]
        )
        lane.markers[-1].label = space.beside(
            x + 5, cy + 3.5, texts, gap=8, css=f"tl-label tl-resolution tl-{outcome}"
        )
    elif event.type in (ev.PROBE_INCONCLUSIVE, ev.PROBE_GAVE_UP):
        said = (
            f"probe gave up at {when} after {payload.get('tries', '?')} tries without an answer"
            if event.type == ev.PROBE_GAVE_UP
            else f"probe answered “unknown” at {when}"
        )
        lane.markers.append(
            Marker(
                x=x,
                y=cy,
                kind="probe",
                css="mk-probe",
                title=f"{step.key}: {said}"
                + (f" (asked by {payload['requested_by']})" if payload.get("requested_by") else "")
                + f"\nevidence: {json_short(payload.get('evidence'))}",
                shapes=[Shape("mk-ring", circle(x, cy, 5.5)), Shape("mk-line", question(x, cy))],
            )
        )
        space.take(x - 6, x + 6)
    elif event.type == ev.PROBE_CONTRADICTS_RESOLUTION:
        answer = "applied" if payload.get("answer") == "applied" else "not applied"
        lane.markers.append(
            Marker(
                x=x,
                y=cy,
                kind="probe-disagrees",
                css="mk-probe mk-probe-disagrees",
                title=f"{step.key}: probe found the effect {answer} at {when}"
                + (f" (asked by {payload['requested_by']})" if payload.get("requested_by") else "")
                + f"\nafter the claim was resolved as {payload.get('resolved_as')} by "
                f"{payload.get('resolved_by')}: the resolution stands"
                f"\nevidence: {json_short(payload.get('evidence'))}",
                shapes=[
                    Shape("mk-ring", circle(x, cy, 5.5)),
                    Shape("mk-bang", f"M{num(x)} {num(cy - 3)}v3.6M{num(x)} {num(cy + 2)}v.8"),
                ],
            )
        )
        space.take(x - 6, x + 6)
        lane.markers[-1].label = space.beside(
            x, cy + 3.5, ["probe disagrees", "disagrees"], gap=8, css="tl-label tl-late"
        )
    elif event.type in (ev.CLAIM_EVIDENCE, ev.LATE_RESULT_AFTER_RESOLUTION):
        after = event.type == ev.LATE_RESULT_AFTER_RESOLUTION
        note = (
            f"\narrived after the claim was resolved as {payload.get('resolved_as')} by "
            f"{payload.get('resolved_by')}: the resolution stands"
            if after
            else "\nkept on the unresolved claim as evidence for the decision"
        )
        lane.markers.append(
            Marker(
                x=x,
                y=cy,
                kind="late",
                css="mk-late" + (" mk-late-after" if after else ""),
                title=f"{step.key}: late result from attempt {event.attempt_number} at {when}"
                f"{note}\nevidence: {json_short(payload.get('evidence'))}",
                shapes=[
                    Shape("mk-fill", triangle(x, cy, 6)),
                    Shape("mk-bang", f"M{num(x)} {num(cy - 2.5)}v3.2"),
                ],
            )
        )
        space.take(x - 6, x + 6)
        lane.markers[-1].label = space.beside(
            x, cy + 3.5, ["late result", "late"], gap=8, css="tl-label tl-late"
        )
    elif event.type == ev.STEP_REFUSED:
        lane.markers.append(
            Marker(
                x=x,
                y=cy,
                kind="refused",
                css="mk-refused",
                title=f"{step.key}: refused by worker {payload.get('worker', '?')} at {when}: "
                f"{payload.get('reason', '')}",
                shapes=[
                    Shape("mk-ring", circle(x, cy, 5)),
                    Shape("mk-line", f"M{num(x - 3.5)} {num(cy + 3.5)}l7 -7"),
                ],
            )
        )
        space.take(x - 6, x + 6)
