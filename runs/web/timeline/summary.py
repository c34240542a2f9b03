"""The timeline in words: the drawing's aria-label, and what its legend explains."""

from __future__ import annotations

from collections.abc import Iterable

from runs.pages.timefmt import duration_text
from runs.pages.words import plural, word
from runs.record import events as ev
from runs.states import AttemptStatus

from .crashes import CrashLog
from .model import OUTCOME_WORDS, Lane
from .rows import Rows, items_in, retried_by


def summary(rows: Rows, log: CrashLog) -> str:
    """The drawing in words: its aria-label, for screen readers (and the tests)."""
    run, axis = rows.run, rows.axis
    end = rows.run_end()
    took = duration_text((end - run.created_at).total_seconds())
    status = run.status.replace("_", " ")
    parts = [
        f"Timeline of run {run.workflow}@{run.version}, {status}, "
        + (f"{took} from submission to finish." if rows.finished else f"{took} so far.")
    ]
    words = []
    for step in rows.top:
        batches = rows.batches.get(step.pk, [])
        tries = rows.attempts.get(step.pk, [])
        if batches:
            done = sum(rows.items_done.get(b.pk, 0) for b in batches)
            items = sum(items_in(b) for b in batches)
            words.append(
                f"{step.key} {word(step.status)} "
                f"({plural(len(batches), 'batch', 'batches')}, {done} of {items} items)"
            )
        elif tries:
            outcomes = ", ".join(
                f"attempt {a.number} {OUTCOME_WORDS.get(AttemptStatus(a.status), a.status)}"
                for a in tries
            )
            words.append(f"{step.key} {word(step.status)} ({outcomes})")
        else:
            words.append(f"{step.key} {word(step.status)}")
    if words:
        parts.append("Steps in plan order: " + "; ".join(words) + ".")
    for step, attempt, seen in log.crashes[:5]:
        parts.append(
            f"{step.key} attempt {attempt.number} crashed: worker {attempt.worker or '?'} "
            f"died after {axis.relative(seen)} (its last sign of life); its lease expired "
            f"at {axis.relative(attempt.lease_expires_at)}"
            + (
                f" and it was declared crashed at {axis.relative(attempt.finished_at)}."
                if attempt.finished_at
                else "."
            )
        )
    if len(log.crashes) > 5:
        parts.append(f"{len(log.crashes) - 5} more crashed attempts.")
    for pause in rows.pauses:
        until = (
            f"until {axis.relative(pause.until)}" if pause.until is not None else "and still stood"
        )
        parts.append(
            f"Its {pause.what} was paused by {pause.actor} at {axis.relative(pause.since)} "
            f"{until}: {pause.reason}."
        )
    # The resolutions, cancels, failures and reopens the catalogue can read (rows.events).
    for event in rows.marks:
        if (resolved := rows.of(event, ev.ClaimResolved)) is not None:
            step_key = rows.step_key(event)
            parts.append(
                f"The claim of {step_key} was resolved as {resolved.outcome} "
                f"by {resolved.actor} at {axis.relative(event.created_at)}."
            )
        elif (cancel := rows.of(event, ev.RunCancelled)) is not None:
            at = axis.relative(event.created_at)
            if cancel.compensated:  # the end of a cancel whose compensations ran
                parts.append(f"Its compensations finished at {at}; it ended cancelled.")
            else:
                parts.append(f"Cancelled by {cancel.actor or 'someone'} at {at}.")
        elif rows.of(event, ev.RunFailed) is not None and rows.reopens:
            parts.append(f"It failed at {axis.relative(event.created_at)}.")
        elif (reopen := rows.of(event, ev.RunReopened)) is not None:
            parts.append(
                f"It was {retried_by(reopen).said} at {axis.relative(event.created_at)} "
                f"(steps {', '.join(reopen.steps)})."
            )
    return " ".join(parts)


def used(lanes: list[Lane]) -> Iterable[str]:
    """What the drawing shows, so that the legend explains just that: attempt
    outcomes, kinds of segment (silent, detect, retry, awaiting), kinds of mark."""
    for lane in lanes:
        for bar in lane.bars:
            if bar.css.startswith("attempt "):
                yield bar.outcome
        for segment in lane.segments:
            yield segment.css.split()[0].removeprefix("tl-")
        for marker in lane.markers:
            yield marker.kind
