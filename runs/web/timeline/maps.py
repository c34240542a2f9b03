"""Map steps: a lane spanning all of a map's batches, and under it, expanded, a lane
per batch, capped, the rest summarized in one lane."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from runs.models import Attempt, Step
from runs.pages.words import plural, short, word
from runs.record import events as ev
from runs.states import AttemptStatus, StepStatus

from .crashes import CrashLog, batch_crash
from .geometry import BAR_H, MIN_BAR_W, PLOT_X0, text_width
from .lanes import LaneStack, solid
from .model import Bar, Label, Lane, Marker, Shape, Toggle
from .placement import Space, inside
from .rows import AUTO_EXPAND_BATCHES, Rows, items_in
from .shapes import triangle
from .steps import not_started, step_body

# A map step's batches get a lane each when there are at most this many (or on
# request), and never more lanes than MAX_BATCH_LANES: the rest are summarized.
MAX_MAP_MARKERS = 50


@dataclass(frozen=True)
class MapStep:
    """A map step as its lane sums it up: its batches, all their attempts, and its
    items (how many, how many done)."""

    step: Step
    batches: list[Step]
    tries: list[Attempt]
    items: int
    done: int


def map_lanes(
    rows: Rows, stack: LaneStack, log: CrashLog, step: Step, batches: list[Step]
) -> Toggle | None:
    """A map step's lane, spanning all its batches, their crashes and failures marked
    on it; expanded, a lane per batch under it. Returns the toggle that shows or hides
    its batches (None: it has none yet)."""
    m = MapStep(
        step=step,
        batches=batches,
        tries=[a for b in batches for a in rows.attempts.get(b.pk, [])],
        items=sum(items_in(b) for b in batches),
        done=sum(rows.items_done.get(b.pk, 0) for b in batches),
    )
    lane = stack.add(
        step.key,
        kind="map",
        status=step.status,
        detail=f"map · {plural(len(batches), 'batch', 'batches')}",
        title=f"{step.key} (map step, {step.kind}): {word(step.status)}, "
        f"{plural(len(batches), 'batch', 'batches')}, {m.done}/{m.items} items done",
    )
    map_span(rows, lane, m)
    # The batches' crashes and failures, on the map's own lane (seen collapsed too).
    batch_marks(rows, log, lane, batches)
    map_labels(lane, m)
    expanded = (
        len(batches) <= AUTO_EXPAND_BATCHES or step.name in rows.expand
    ) and step.name not in rows.collapse
    if not batches:
        return None
    shown = pick_batches(rows, batches) if expanded else []
    for batch in shown:
        batch_lane(rows, stack, log, batch)
    if expanded and len(shown) < len(batches):
        more_lane(rows, stack, step, [b for b in batches if b not in set(shown)])
    return Toggle(step.name, len(batches), expanded, len(shown))


def map_span(rows: Rows, lane: Lane, m: MapStep) -> None:
    """The bar from the map's first attempt to its last (or to now), or what it waits
    for when none has started."""
    axis, step, tries = rows.axis, m.step, m.tries
    by_outcome: dict[str, int] = defaultdict(int)
    for a in tries:
        by_outcome[a.status] += 1
    counts = ", ".join(f"{n} {s}" for s, n in sorted(by_outcome.items()))
    start = step.started_at or min((a.started_at for a in tries), default=None)
    if start is None:
        not_started(rows, lane, step)
        return
    ends = [a.finished_at or rows.active_end() for a in tries]
    if step.finished_at is not None:
        ends.append(step.finished_at)
    elif not rows.finished and step.status == StepStatus.RUNNING:
        ends.append(rows.now)
    end = max(ends, default=start)
    lines = [
        f"{step.key} · map step · {word(step.status)}",
        f"{plural(len(m.batches), 'batch', 'batches')}, {m.done} of {m.items} items done",
        f"attempts: {len(tries)} ({counts})" if tries else "no attempt yet",
        f"from {axis.when(start)}",
        f"to {axis.when(end)}" + (" (so far)" if step.finished_at is None else ""),
    ]
    if step.error:
        lines.append(f"error: {short(step.error, 400)}")
    solid(
        rows.axis,
        lane,
        Space(),
        start,
        end,
        f"map-span map-{step.status}",
        "\n".join(lines),
        step.status,
    )


def batch_marks(rows: Rows, log: CrashLog, lane: Lane, batches: list[Step]) -> None:
    """Each batch's crashed and failed attempts, at most MAX_MAP_MARKERS of them."""
    drawn = 0
    for batch in batches:
        taken = {
            e.attempt_number: e
            for e in rows.step_marks.get(batch.pk, [])
            if e.type == ev.CLAIM_TAKEN
        }
        for a in rows.attempts.get(batch.pk, []):
            if drawn >= MAX_MAP_MARKERS:
                break
            if a.status == AttemptStatus.CRASHED:
                lane.markers.append(batch_crash(rows, log, lane, batch, a, taken.get(a.number)))
                drawn += 1
            elif a.status == AttemptStatus.FAILED:
                lane.markers.append(batch_failed(rows, lane, batch, a))
                drawn += 1


def batch_failed(rows: Rows, lane: Lane, batch: Step, a: Attempt) -> Marker:
    axis = rows.axis
    x = axis.x(a.finished_at or a.started_at)
    return Marker(
        x=x,
        y=lane.bar_y + BAR_H + 1,
        kind="failed",
        css="mk-failed",
        title=f"{batch.key} attempt {a.number} failed at "
        f"{axis.when(a.finished_at or a.started_at)}: {short(a.error, 300)}",
        shapes=[Shape("mk-fill", triangle(x, lane.bar_y + BAR_H + 1, 4))],
    )


def map_labels(lane: Lane, m: MapStep) -> None:
    """The items done inside the span, and who died over it (the first crash)."""
    if lane.bars:
        (span,) = lane.bars
        texts = [
            f"{m.done}/{m.items} items · {plural(len(m.batches), 'batch', 'batches')}",
            f"{m.done}/{m.items} items",
            f"{len(m.batches)} batches",
        ]
        span.label = inside(span, texts, lane, "tl-label tl-in tl-in-map")
    crash_marks = [mark for mark in lane.markers if mark.kind == "crash"]
    if crash_marks:
        first = crash_marks[0]
        key = first.title.split(" ", 1)[0]
        # Over the span bar the label sits above it, in the lane's own band.
        first.label = Label(
            x=first.x + 9,
            y=lane.bar_y - 2,
            text=f"{key}: worker died",
            css="tl-label tl-crash-label tl-above",
        )


def batch_lane(rows: Rows, stack: LaneStack, log: CrashLog, batch: Step) -> None:
    tries = rows.attempts.get(batch.pk, [])
    items = items_in(batch)
    done = rows.items_done.get(batch.pk, 0)
    lane = stack.add(
        batch.key,
        kind="batch",
        status=batch.status,
        detail=f"{done}/{items} items",
        depth=1,
        title=f"{batch.key}: {word(batch.status)}, {done} of {items} items "
        f"done, {plural(len(tries), 'attempt')}",
    )
    step_body(rows, log, lane, batch)


def pick_batches(rows: Rows, batches: list[Step]) -> list[Step]:
    """At most max_batch_lanes batches, those with something to see first (not
    succeeded, or tried more than once), then the others in order; in order."""
    cap = rows.max_batch_lanes
    if len(batches) <= cap:
        return batches

    def notable(b: Step) -> bool:
        tries = rows.attempts.get(b.pk, [])
        return (
            b.status != StepStatus.SUCCEEDED
            or len(tries) > 1
            or any(a.status != AttemptStatus.SUCCEEDED for a in tries)
        )

    first = [b for b in batches if notable(b)][:cap]
    rest = [b for b in batches if not notable(b)][: cap - len(first)]
    chosen = {b.pk for b in first + rest}
    return [b for b in batches if b.pk in chosen]


def more_lane(rows: Rows, stack: LaneStack, step: Step, omitted: list[Step]) -> None:
    """One lane for the batches not drawn one by one."""
    axis = rows.axis
    statuses: dict[str, int] = defaultdict(int)
    for b in omitted:
        statuses[b.status] += 1
    said = ", ".join(f"{n} {s}" for s, n in sorted(statuses.items()))
    items = sum(items_in(b) for b in omitted)
    done = sum(rows.items_done.get(b.pk, 0) for b in omitted)
    lane = stack.add(
        f"{step.key}[…]",
        kind="more",
        status=max(statuses, key=lambda s: statuses[s]) if statuses else "",
        detail=said,
        depth=1,
        title=f"{len(omitted)} more batches of {step.key}, not drawn one by one: {said}",
    )
    lane.label = f"+ {len(omitted)} more batches"
    tries = [a for b in omitted for a in rows.attempts.get(b.pk, [])]
    if not tries:
        lane.labels.append(
            Label(
                x=PLOT_X0 + 4, y=lane.mid + 3.5, text=f"not started: {said}", css="tl-label tl-none"
            )
        )
        return
    start = min(a.started_at for a in tries)
    end = max(a.finished_at or rows.active_end() for a in tries)
    x0 = axis.x(start)
    x1 = max(axis.x(end), x0 + MIN_BAR_W)
    bar = Bar(
        x=x0,
        y=lane.bar_y,
        width=round(x1 - x0, 1),
        height=BAR_H,
        css="more-span",
        title=f"{len(omitted)} batches of {step.key} not drawn one by one ({said}); "
        f"{done} of {items} items done\nfrom {axis.when(start)} to {axis.when(end)}\n"
        "the steps table below lists every batch",
    )
    lane.bars.append(bar)
    text = f"{len(omitted)} batches: {said}"
    if text_width(text) + 8 <= bar.width:
        bar.label = Label(x=bar.x + 4, y=lane.mid + 3.5, text=text, css="tl-label tl-in-more")
