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

# The events step_mark draws (docs/architecture.md#the-event-catalogue).
DRAWN = frozenset(
    {
        ev.CLAIM_TAKEN,
        ev.CLAIM_RESOLVED,
        ev.PROBE_INCONCLUSIVE,
        ev.PROBE_GAVE_UP,
        ev.PROBE_CONTRADICTS_RESOLUTION,
        ev.CLAIM_EVIDENCE,
        ev.LATE_RESULT_AFTER_RESOLUTION,
        ev.STEP_REFUSED,
    }
)


def step_mark(
    rows: Rows, lane: Lane, space: Space, step: Step, event: Event, taken: Mapping[Any, Event]
) -> None:
    axis = rows.axis
    x, cy = axis.x(event.created_at), lane.mid
    data = ev.read_row(event) if event.type in DRAWN else None  # the others are not read
    when = axis.when(event.created_at)
    if isinstance(data, ev.ClaimTaken):
        retaken = " (taken over from an earlier attempt, same key)" if data.retaken else ""
        y = lane.bar_y - 1
        lane.markers.append(
            Marker(
                x,
                y,
                "claim",
                "mk-claim",
                f"{step.key} attempt {event.attempt_number}: claim taken at {when}{retaken}\n"
                f"idempotency key: {data.key}",
                [Shape("mk-fill", diamond(x, y, 4))],
            )
        )
    elif isinstance(data, ev.ClaimResolved):
        who = data.actor or "?"
        outcome = data.outcome or "?"
        by_probe = who == "probe"
        top, bottom = lane.y + 2, lane.y + lane.height - 3
        lane.markers.append(
            Marker(
                x,
                cy,
                "resolution",
                f"mk-resolution mk-{outcome}" + (" mk-by-probe" if by_probe else ""),
                f"{step.key}: claim resolved as {outcome} by {who} at {when}\n"
                f"note: “{short(data.note or '', 300)}”\n"
                f"key: {data.key}"
                + (f"\nevidence: {json_short(data.evidence)}" if data.evidence else ""),
                flag(x, top, bottom),
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
    elif isinstance(data, ev.ProbeInconclusive | ev.ProbeGaveUp):
        said = (
            f"probe gave up at {when} after {data.tries} tries without an answer"
            if isinstance(data, ev.ProbeGaveUp)
            else f"probe answered “unknown” at {when}"
        )
        asked = data.requested_by if isinstance(data, ev.ProbeInconclusive) else ""
        lane.markers.append(
            Marker(
                x,
                cy,
                "probe",
                "mk-probe",
                f"{step.key}: {said}"
                + (f" (asked by {asked})" if asked else "")
                + f"\nevidence: {json_short(data.evidence)}",
                [Shape("mk-ring", circle(x, cy, 5.5)), Shape("mk-line", question(x, cy))],
            )
        )
        space.take(x - 6, x + 6)
    elif isinstance(data, ev.ProbeContradictsResolution):
        answer = "applied" if data.answer == "applied" else "not applied"
        lane.markers.append(
            Marker(
                x,
                cy,
                "probe-disagrees",
                "mk-probe mk-probe-disagrees",
                f"{step.key}: probe found the effect {answer} at {when}"
                + (f" (asked by {data.requested_by})" if data.requested_by else "")
                + f"\nafter the claim was resolved as {data.resolved_as} by "
                f"{data.resolved_by}: the resolution stands"
                f"\nevidence: {json_short(data.evidence)}",
                [
                    Shape("mk-ring", circle(x, cy, 5.5)),
                    Shape("mk-bang", f"M{num(x)} {num(cy - 3)}v3.6M{num(x)} {num(cy + 2)}v.8"),
                ],
            )
        )
        space.take(x - 6, x + 6)
        lane.markers[-1].label = space.beside(
            x, cy + 3.5, ["probe disagrees", "disagrees"], gap=8, css="tl-label tl-late"
        )
    elif isinstance(data, ev.ClaimEvidence | ev.LateResultAfterResolution):
        after = isinstance(data, ev.LateResultAfterResolution)
        note = (
            f"\narrived after the claim was resolved as {data.resolved_as} by "
            f"{data.resolved_by}: the resolution stands"
            if isinstance(data, ev.LateResultAfterResolution)
            else "\nkept on the unresolved claim as evidence for the decision"
        )
        lane.markers.append(
            Marker(
                x,
                cy,
                "late",
                "mk-late" + (" mk-late-after" if after else ""),
                f"{step.key}: late result from attempt {event.attempt_number} at {when}"
                f"{note}\nevidence: {json_short(data.evidence)}",
                [
                    Shape("mk-fill", triangle(x, cy, 6)),
                    Shape("mk-bang", f"M{num(x)} {num(cy - 2.5)}v3.2"),
                ],
            )
        )
        space.take(x - 6, x + 6)
        lane.markers[-1].label = space.beside(
            x, cy + 3.5, ["late result", "late"], gap=8, css="tl-label tl-late"
        )
    elif isinstance(data, ev.StepRefused):
        lane.markers.append(
            Marker(
                x,
                cy,
                "refused",
                "mk-refused",
                f"{step.key}: refused by worker {data.worker} at {when}: {data.reason}",
                [
                    Shape("mk-ring", circle(x, cy, 5)),
                    Shape("mk-line", f"M{num(x - 3.5)} {num(cy + 3.5)}l7 -7"),
                ],
            )
        )
        space.take(x - 6, x + 6)
