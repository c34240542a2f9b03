"""Where a worker died: a crashed attempt's bar ends at its last sign of life (the last
thing it recorded), marked with a ✕; a hatched stretch follows while its lease ran out,
then a dotted one until recovery declared it crashed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from runs.models import Attempt, Event, Step
from runs.pages.timefmt import duration_text
from runs.pages.words import short

from .geometry import BAR_H, CHAR_W, WIDTH
from .lanes import attempt_title, solid
from .model import Bar, Label, Lane, Marker, Segment, Shape
from .placement import Space
from .rows import Rows
from .shapes import circle, cross, vline


@dataclass
class CrashLog:
    """The crashes drawn (for the summary) and each crashed attempt's last sign of
    life, by attempt id (for the steps table too)."""

    crashes: list[tuple[Step, Attempt, datetime]] = field(default_factory=list)
    last_seen: dict[int, datetime] = field(default_factory=dict)

    def last_sign_of_life(
        self, rows: Rows, attempt: Attempt, taken: Event | None
    ) -> tuple[datetime, str]:
        """The last thing a crashed attempt recorded: its last lease renewal, its last
        committed map item, the claim it took, or only its start. The worker died after
        this, and before its lease expired."""
        seen, what = attempt.started_at, "it started (nothing recorded after)"
        step = rows.steps_by_id.get(attempt.step_id)
        lease = rows.leases.get(step.name) if step is not None else None
        if lease:
            # A lease is renewed to now + its length (a heartbeat, a committed map item,
            # the check before a guarded effect), so its end, less its length, is the
            # last renewal, if that falls after the start (else it was never renewed,
            # or this process does not know the length the worker used).
            renewed = attempt.lease_expires_at - timedelta(seconds=lease)
            if renewed > seen + timedelta(milliseconds=1):
                seen, what = renewed, "it renewed its lease"
        progress = rows.items.get(attempt.pk)
        if progress is not None and progress.last_at is not None and progress.last_at >= seen:
            seen = progress.last_at
            what = f"item {progress.committed} committed (of those this attempt did)"
        if taken is not None and taken.created_at > seen:
            seen, what = taken.created_at, "it took its claim"
        cap = min(t for t in (attempt.lease_expires_at, attempt.finished_at) if t is not None)
        seen = max(attempt.started_at, min(seen, cap))
        self.last_seen[attempt.pk] = seen
        return seen, what


@dataclass(frozen=True)
class Death:
    """One crashed attempt as its lane draws it: who, its last sign of life (`seen`,
    and `what` it was), when its lease expired and when recovery declared it crashed,
    and where each of those three falls on the lane."""

    lane: Lane
    key: str
    number: int
    who: str
    seen: datetime
    what: str
    expired: datetime
    declared: datetime
    x_dead: float
    x_expired: float
    x_declared: float


def crashed(
    rows: Rows,
    log: CrashLog,
    lane: Lane,
    space: Space,
    step: Step,
    attempt: Attempt,
    taken: Event | None,
    pending: list[tuple[Bar, list[str]]],
) -> tuple[datetime, str]:
    """Where the worker died: a bar to its last sign of life, a ✕ there, a hatched
    stretch while its lease ran out, a dotted one until recovery noticed."""
    axis = rows.axis
    assert attempt.finished_at is not None
    seen, what = log.last_sign_of_life(rows, attempt, taken)
    expired, declared = attempt.lease_expires_at, attempt.finished_at
    worked = duration_text((seen - attempt.started_at).total_seconds())
    extra = [
        f"last sign of life: {axis.when(seen)}: {what}",
        f"lease expired: {axis.when(expired)} (the worker never renewed it)",
        f"declared crashed: {axis.when(declared)}, by recovery",
        f"worked {worked}, then went silent",
    ]
    title = attempt_title(rows, step, attempt, "crashed: the worker died", extra)
    bar = solid(
        axis, lane, space, attempt.started_at, seen, "attempt attempt-crashed", title, "crashed"
    )
    n = attempt.number
    pending.append((bar, [f"#{n} crashed", "crashed"]))
    x_dead = bar.x + bar.width
    x_expired = max(axis.x(expired), x_dead)
    death = Death(
        lane=lane,
        key=step.key,
        number=n,
        who=attempt.worker or "?",
        seen=seen,
        what=what,
        expired=expired,
        declared=declared,
        x_dead=x_dead,
        x_expired=x_expired,
        x_declared=max(axis.x(declared), x_expired),
    )
    silence(rows, death)
    lane.markers.append(lease_mark(rows, death))
    lane.markers.append(death_mark(rows, death))
    space.take(x_dead - 8, x_dead + 8)
    log.crashes.append((step, attempt, seen))
    tiny_labels(death)
    # Said in words next to the ✕ (over the hatching, which is not solid).
    lane.markers[-1].label = space.beside(
        x_dead,
        lane.mid + 3.5,
        [f"worker died · {short(death.who, 24)}", "worker died", "died"],
        gap=11,
        css="tl-label tl-crash-label",
    )
    return declared, f"attempt {n} was declared crashed"


def silence(rows: Rows, d: Death) -> None:
    """Hatched while the lease ran out, then dotted until recovery declared the crash."""
    axis, lane = rows.axis, d.lane
    if d.x_expired > d.x_dead:
        lane.segments.append(
            Segment(
                x=d.x_dead,
                y=lane.bar_y,
                width=round(d.x_expired - d.x_dead, 1),
                height=BAR_H,
                css="tl-silent",
                title=f"{d.key} attempt {d.number}: no sign of life from {d.who} after "
                f"{axis.when(d.seen)}; its lease ran out at {axis.when(d.expired)}",
                fill="url(#tl-hatch-crashed)",
            )
        )
    if d.x_declared > d.x_expired:
        lane.segments.append(
            Segment(
                x=d.x_expired,
                y=lane.mid - 0.75,
                width=round(d.x_declared - d.x_expired, 1),
                height=1.5,
                css="tl-detect",
                title=f"{d.key} attempt {d.number}: lease expired at {axis.when(d.expired)}; "
                f"recovery declared the attempt crashed at {axis.when(d.declared)}",
            )
        )


def lease_mark(rows: Rows, d: Death) -> Marker:
    lane = d.lane
    top, bottom = lane.bar_y - 2, lane.bar_y + BAR_H + 2
    return Marker(
        x=d.x_expired,
        y=lane.mid,
        kind="lease-expired",
        css="mk-lease",
        title=f"{d.key} attempt {d.number}: lease expired at {rows.axis.when(d.expired)}",
        shapes=[Shape("mk-line", vline(d.x_expired, top, bottom))],
    )


def death_mark(rows: Rows, d: Death) -> Marker:
    axis, lane = rows.axis, d.lane
    return Marker(
        x=d.x_dead,
        y=lane.mid,
        kind="crash",
        css="mk-crash",
        title=f"{d.key} attempt {d.number}: worker {d.who} died here\n"
        f"last sign of life: {axis.when(d.seen)}: {d.what}; nothing after it\n"
        f"lease expired: {axis.when(d.expired)}\n"
        f"declared crashed: {axis.when(d.declared)}",
        shapes=[
            Shape("mk-disc", circle(d.x_dead, lane.mid, 7.5)),
            Shape("mk-x", cross(d.x_dead, lane.mid, 3.3)),
        ],
    )


def tiny_labels(d: Death) -> None:
    """Above the bar, small: when the lease ran out and when recovery noticed."""
    lane = d.lane
    tiny_y, tiny_w = lane.bar_y - 2.5, CHAR_W * 0.85
    said = "lease expired"
    if d.x_expired - 3 - len(said) * tiny_w > d.x_dead + 9:
        lane.labels.append(
            Label(x=d.x_expired - 3, y=tiny_y, text=said, css="tl-label tl-tiny", anchor="end")
        )
    said = "declared crashed"
    if d.x_declared > d.x_expired + 1 and d.x_declared + 3 + len(said) * tiny_w < WIDTH - 2:
        lane.labels.append(Label(x=d.x_declared + 3, y=tiny_y, text=said, css="tl-label tl-tiny"))


def batch_crash(
    rows: Rows, log: CrashLog, lane: Lane, batch: Step, attempt: Attempt, taken: Event | None
) -> Marker:
    """A batch's crash, marked on its map step's lane (seen with the batches collapsed)."""
    axis = rows.axis
    seen, what = log.last_sign_of_life(rows, attempt, taken)
    x = axis.x(seen)
    return Marker(
        x=x,
        y=lane.mid,
        kind="crash",
        css="mk-crash mk-crash-map",
        title=f"{batch.key} attempt {attempt.number}: worker {attempt.worker or '?'} died here\n"
        f"last sign of life: {axis.when(seen)}: {what}\n"
        f"lease expired: {axis.when(attempt.lease_expires_at)}",
        shapes=[
            Shape("mk-disc", circle(x, lane.mid, 6.5)),
            Shape("mk-x", cross(x, lane.mid, 2.8)),
        ],
    )
