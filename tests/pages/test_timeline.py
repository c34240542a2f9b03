"""The run timeline (runs/web/timeline/) and the run page that draws it.

The layout model is a pure function of rows, so most tests build rows in memory with
exact times (`Story`) and check the geometry and the words; the page tests use runs
made by the engine and count queries."""

from __future__ import annotations

import itertools
import json
import re
import uuid
from collections.abc import Callable, Collection, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection, transaction
from django.http import QueryDict
from django.template.loader import render_to_string
from django.test.utils import CaptureQueriesContext

from reconciliation.services import resolve_claim
from runs import engine
from runs.engine.tools import start_attempt
from runs.models import Attempt, Claim, Event, Run, Step
from runs.pages import timefmt
from runs.record import events
from runs.states import AttemptStatus, RunStatus, StepStatus
from runs.web import timeline, views
from tests.support import factories
from tests.support.markup import folded

T0 = datetime(2025, 3, 4, 12, 0, 0, tzinfo=UTC)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


class Story:
    """A run's rows, in memory, at exact times (seconds after T0)."""

    def __init__(
        self,
        status: str = RunStatus.SUCCEEDED,
        finished: float | None = 10.0,
        workflow: str = "migrate-records",
    ) -> None:
        self.run = Run(
            id=uuid.UUID(int=7),
            workflow=workflow,
            version=1,
            status=status,
            input={"count": 3},
            created_at=T0,
            finished_at=at(finished) if finished is not None else None,
        )
        self.steps: list[Step] = []
        self.attempts: list[Attempt] = []
        self.events: list[Event] = []
        self._ids = itertools.count(1)

    def step(
        self,
        key: str,
        *,
        kind: str = "pure",
        status: str = StepStatus.SUCCEEDED,
        parent: Step | None = None,
        items: int | None = None,
        batches: int | None = None,
        started: float | None = None,
        finished: float | None = None,
        next_attempt: float | None = None,
        depends_on: tuple[str, ...] = (),
        max_attempts: int = 3,
        error: str = "",
    ) -> Step:
        step = Step(
            id=next(self._ids),
            run=self.run,
            key=key,
            name=key.split("[")[0],
            kind=kind,
            status=status,
            parent_id=parent.pk if parent else None,
            batch_index=int(key.split("[")[1].rstrip("]")) if parent else None,
            items=[{"key": str(i), "item": i} for i in range(items)] if items else None,
            pending_children=0 if batches is not None else None,
            started_at=at(started) if started is not None else None,
            finished_at=at(finished) if finished is not None else None,
            next_attempt_at=at(next_attempt) if next_attempt is not None else None,
            depends_on=list(depends_on),
            max_attempts=max_attempts,
            error=error,
        )
        self.steps.append(step)
        return step

    def attempt(
        self,
        step: Step,
        number: int,
        status: str,
        start: float,
        end: float | None = None,
        *,
        lease: float | None = None,
        worker: str = "w1",
        error: str = "",
    ) -> Attempt:
        attempt = Attempt(
            id=next(self._ids),
            step_id=step.pk,
            run_id=self.run.pk,
            number=number,
            status=status,
            worker=worker,
            started_at=at(start),
            lease_expires_at=at(lease if lease is not None else (end or start) + 60),
            finished_at=at(end) if end is not None else None,
            error=error,
        )
        self.attempts.append(attempt)
        return attempt

    def event(
        self, type: str, t: float, *, on: Step | None = None, attempt: int | None = None, **p: Any
    ) -> Event:
        event = Event(
            run_id=self.run.pk,
            seq=len(self.events) + 1,
            type=type,
            step_id=on.pk if on else None,
            attempt_number=attempt,
            payload=p,
            created_at=at(t),
        )
        self.events.append(event)
        return event

    def build(
        self,
        now: float = 3600,
        *,
        expand: Collection[str] = (),
        collapse: Collection[str] = (),
        max_batch_lanes: int = timeline.MAX_BATCH_LANES,
        **source: Any,
    ) -> timeline.Timeline:
        return timeline.build(
            timeline.Source(self.run, self.steps, self.attempts, self.events, **source),
            now=at(now),
            shown=timeline.Shown(frozenset(expand), frozenset(collapse), max_batch_lanes),
        )


def crashed_batch_story() -> tuple[Story, dict[str, Any]]:
    """migrate-records: list_records, then a map of 3 batches; batch 1's first worker
    committed 19 items, died at +3.9 s (its last item at +3.8 s), its lease ran out at
    +5.8 s, recovery noticed at +6.1 s, and attempt 2 ran from +6.3 s."""
    s = Story(finished=8.0)
    listing = s.step("list_records")
    s.attempt(listing, 1, AttemptStatus.SUCCEEDED, 0.1, 0.3, worker="w-a")
    migrate = s.step("migrate", kind="transactional", batches=3, started=0.4, finished=7.9)
    b0 = s.step("migrate[0]", kind="transactional", parent=migrate, items=50)
    b1 = s.step("migrate[1]", kind="transactional", parent=migrate, items=50)
    b2 = s.step("migrate[2]", kind="transactional", parent=migrate, items=50)
    s.attempt(b0, 1, AttemptStatus.SUCCEEDED, 0.5, 2.0, worker="w-a")
    dead = s.attempt(
        b1, 1, AttemptStatus.CRASHED, 2.1, 6.1, lease=5.8, worker="w-a", error="lease expired"
    )
    retry = s.attempt(b1, 2, AttemptStatus.SUCCEEDED, 6.3, 7.0, worker="w-b")
    s.attempt(b2, 1, AttemptStatus.SUCCEEDED, 4.0, 5.5, worker="w-b")
    items = {
        dead.pk: timeline.ItemProgress(19, at(3.8)),
        retry.pk: timeline.ItemProgress(31, at(6.9)),
    }
    return s, {
        "items": items,
        "items_done": {b0.pk: 50, b1.pk: 50, b2.pk: 50},
        "dead": dead,
        "retry": retry,
    }


def merge_resolved_story() -> Story:
    """merge-change: the guarded attempt's worker died after taking its claim; the claim
    waited for a decision; the probe could not tell; olivia resolved it as succeeded."""
    s = Story(workflow="merge-change", finished=130.0)
    merge = s.step("merge", kind="guarded")
    s.attempt(merge, 1, AttemptStatus.CRASHED, 1.0, 65.0, lease=61.0, worker="w-9")
    s.event(events.CLAIM_TAKEN, 1.01, on=merge, attempt=1, key="run/merge@1", retaken=False)
    s.event(events.STEP_UNRESOLVED, 65.0, on=merge, attempt=1, reason="worker w-9 died")
    s.event(events.RUN_NEEDS_RECONCILIATION, 65.0, step="merge")
    s.event(events.PROBE_INCONCLUSIVE, 96.0, on=merge, key="run/merge@1", evidence={"x": 1})
    s.event(
        events.CLAIM_RESOLVED,
        120.0,
        on=merge,
        key="run/merge@1",
        outcome="succeeded",
        actor="olivia",
        note="merged, see PR 9",
        evidence=None,
    )
    s.event(events.RUN_RESUMED, 120.0)
    return s


# --- the time axis ------------------------------------------------------------------------
def test_axis_two_second_run_has_half_second_ticks():
    s = Story(finished=2.0)
    tl = s.build()
    assert [t.label for t in tl.ticks] == ["0", "+0.5 s", "+1 s", "+1.5 s", "+2 s"]
    assert [t.x for t in tl.ticks] == [200.0, 393.0, 586.0, 779.0, 972.0]
    assert tl.ticks[3].title == "2025-03-04 12:00:01.500 UTC"


def test_axis_two_day_run_has_six_hour_ticks():
    s = Story(finished=2 * 86400)
    tl = s.build(now=3 * 86400)
    assert [t.label for t in tl.ticks] == [
        "0",
        "+6 h",
        "+12 h",
        "+18 h",
        "+1 d",
        "+1 d 6 h",
        "+1 d 12 h",
        "+1 d 18 h",
        "+2 d",
    ]
    assert tl.ticks[-1].title == "2025-03-06 12:00:00.000 UTC"
    assert [t.anchor for t in tl.ticks] == ["middle"] * 8 + ["middle"]
    # A long label on the last tick stays inside the drawing.
    assert timeline.Tick(timeline.PLOT_X1, "+2 min 30 s", "").anchor == "end"


@pytest.mark.parametrize(
    ("seconds", "labels"),
    [
        (0.15, ["0", "+20 ms", "+40 ms", "+60 ms", "+80 ms", "+100 ms", "+120 ms", "+140 ms", "+160 ms"]),  # noqa: E501
        (1.5, ["0", "+0.2 s", "+0.4 s", "+0.6 s", "+0.8 s", "+1 s", "+1.2 s", "+1.4 s", "+1.6 s"]),
        (45, ["0", "+10 s", "+20 s", "+30 s", "+40 s", "+50 s"]),
        (200, ["0", "+30 s", "+1 min", "+1 min 30 s", "+2 min", "+2 min 30 s", "+3 min", "+3 min 30 s"]),  # noqa: E501
        (3000, ["0", "+10 min", "+20 min", "+30 min", "+40 min", "+50 min"]),
        (26 * 3600, ["0", "+6 h", "+12 h", "+18 h", "+1 d", "+1 d 6 h"]),
        (20 * 86400, ["0", "+7 d", "+14 d", "+21 d"]),
    ],
)  # fmt: skip
def test_axis_nice_ticks_for_any_span(seconds, labels):
    axis = timeline.nice_axis(T0, at(seconds))
    assert [timeline.tick_label(i * axis.interval, axis.interval, axis.seconds)
            for i in range(axis.count + 1)] == labels  # fmt: skip
    assert axis.count <= timeline.MAX_TICKS
    assert axis.seconds >= seconds


def test_duration_text_reads_well_at_every_scale():
    assert [timefmt.duration_text(s) for s in (0.0123, 2.351, 12.34, 245, 7500, 93600)] == [
        "12 ms",
        "2.35 s",
        "12.3 s",
        "4 min 5 s",
        "2 h 5 min",
        "1 d 2 h",
    ]


# --- lanes and bars -----------------------------------------------------------------------
def test_lanes_follow_plan_order_with_batches_grouped_under_their_map():
    s, extra = crashed_batch_story()
    tl = s.build(items=extra["items"], items_done=extra["items_done"])
    assert [(lane.key, lane.kind, lane.depth) for lane in tl.lanes] == [
        ("run", "run", 0),
        ("list_records", "step", 0),
        ("migrate", "map", 0),
        ("migrate[0]", "batch", 1),
        ("migrate[1]", "batch", 1),
        ("migrate[2]", "batch", 1),
    ]
    # Lanes are stacked without overlap, top to bottom.
    tops = [lane.y for lane in tl.lanes]
    assert tops == sorted(tops)
    assert all(a.y + a.height == b.y for a, b in itertools.pairwise(tl.lanes))


def test_map_lane_spans_its_batches_with_counts():
    s, extra = crashed_batch_story()
    tl = s.build(items=extra["items"], items_done=extra["items_done"])
    lane = tl.lane("migrate")
    (span,) = lane.bars
    assert span.css == "map-span map-succeeded"
    assert span.x == tl.axis.x(at(0.4)) and span.x + span.width == pytest.approx(tl.axis.x(at(7.9)))
    assert span.label.text == "150/150 items · 3 batches"
    # The words keep clear of the crash drawn on the span.
    (crash,) = [m for m in lane.markers if m.kind == "crash"]
    assert span.label.x + timeline.CHAR_W * len(span.label.text) < crash.x - 8
    assert "3 batches, 150 of 150 items done" in span.title
    assert "attempts: 4 (1 crashed, 3 succeeded)" in span.title
    assert lane.detail == "map · 3 batches"


def test_one_bar_per_attempt_classed_and_labelled_by_outcome():
    s, extra = crashed_batch_story()
    tl = s.build(items=extra["items"], items_done=extra["items_done"])
    lane = tl.lane("migrate[1]")
    assert [(b.css, b.outcome) for b in lane.bars] == [
        ("attempt attempt-crashed", "crashed"),
        ("attempt attempt-succeeded", "succeeded"),
    ]
    assert [b.label.text for b in lane.bars if b.label] == ["#1 crashed", "succeeded"]
    assert tl.lane("migrate[0]").bars[0].css == "attempt attempt-succeeded"


def test_crash_marker_sits_at_the_last_sign_of_life_before_the_lease_ran_out():
    s, extra = crashed_batch_story()
    tl = s.build(items=extra["items"], items_done=extra["items_done"])
    axis, lane = tl.axis, tl.lane("migrate[1]")
    crashed, retry = lane.bars
    # The solid bar ends where the worker last committed an item; the ✕ is there.
    assert crashed.x == axis.x(at(2.1))
    assert crashed.x + crashed.width == pytest.approx(axis.x(at(3.8)))
    (crash,) = [m for m in lane.markers if m.kind == "crash"]
    assert crash.x == pytest.approx(axis.x(at(3.8)))
    assert crash.label.text == "worker died · w-a"
    assert crash.title.splitlines() == [
        "migrate[1] attempt 1: worker w-a died here",
        "last sign of life: 2025-03-04 12:00:03.800 UTC (+3.8 s): "
        "item 19 committed (of those this attempt did); nothing after it",
        "lease expired: 2025-03-04 12:00:05.800 UTC (+5.8 s)",
        "declared crashed: 2025-03-04 12:00:06.100 UTC (+6.1 s)",
    ]
    # Then: hatched while the lease ran out, dotted until recovery noticed, dashed retry.
    assert [(seg.css, seg.x, seg.x2) for seg in lane.segments] == [
        ("tl-silent", pytest.approx(axis.x(at(3.8))), axis.x(at(5.8))),
        ("tl-detect", axis.x(at(5.8)), axis.x(at(6.1))),
        ("tl-retry", axis.x(at(6.1)), axis.x(at(6.3))),
    ]
    assert lane.segments[0].fill == "url(#tl-hatch-crashed)"
    assert not lane.segments[0].is_line and lane.segments[1].is_line
    assert lane.segments[2].title == (
        "retry: attempt 2 started 200 ms after attempt 1 was declared crashed"
    )
    (lease,) = [m for m in lane.markers if m.kind == "lease-expired"]
    assert lease.x == axis.x(at(5.8))
    assert retry.x > crash.x
    # The map's own lane shows the crash too (seen when the batches are collapsed).
    (on_map,) = [m for m in tl.lane("migrate").markers if m.kind == "crash"]
    assert on_map.x == crash.x and on_map.label.text == "migrate[1]: worker died"
    assert tl.crashes == 1


def test_crash_without_any_record_after_the_start_dies_at_the_start():
    s = Story(finished=100)
    merge = s.step("merge", kind="guarded", status=StepStatus.FAILED)
    s.attempt(merge, 1, AttemptStatus.CRASHED, 10, 75, lease=70, error="lease expired")
    tl = s.build()
    lane = tl.lane("merge")
    (crash,) = [m for m in lane.markers if m.kind == "crash"]
    assert crash.x == tl.axis.x(at(10)) + timeline.MIN_BAR_W
    assert "it started (nothing recorded after)" in crash.title


def test_crash_after_heartbeats_dies_after_its_last_lease_renewal():
    s = Story(finished=200)
    sync = s.step("sync", kind="idempotent", status=StepStatus.FAILED)
    s.attempt(sync, 1, AttemptStatus.CRASHED, 10, 105, lease=100)
    tl = s.build(leases={"sync": 60})  # renewed at +40 s, then nothing
    (crash,) = [m for m in tl.lane("sync").markers if m.kind == "crash"]
    assert crash.x == tl.axis.x(at(40))
    assert "last sign of life: 2025-03-04 12:00:40.000 UTC (+40 s): it renewed its lease" in (
        crash.title
    )
    # A length that does not fit (the lease was never renewed, or the workers use
    # another one) is not taken for a renewal.
    tl = s.build(leases={"sync": 120})
    (crash,) = [m for m in tl.lane("sync").markers if m.kind == "crash"]
    assert crash.x == tl.axis.x(at(10)) + timeline.MIN_BAR_W


def test_attempt_titles_carry_the_details():
    s, extra = crashed_batch_story()
    tl = s.build(items=extra["items"], items_done=extra["items_done"])
    crashed, retry = tl.lane("migrate[1]").bars
    assert crashed.title.splitlines() == [
        "migrate[1] · attempt 1 of 3 · crashed: the worker died",
        "worker: w-a",
        "started: 2025-03-04 12:00:02.100 UTC (+2.1 s)",
        "last sign of life: 2025-03-04 12:00:03.800 UTC (+3.8 s): "
        "item 19 committed (of those this attempt did)",
        "lease expired: 2025-03-04 12:00:05.800 UTC (+5.8 s) (the worker never renewed it)",
        "declared crashed: 2025-03-04 12:00:06.100 UTC (+6.1 s), by recovery",
        "worked 1.7 s, then went silent",
        "error: lease expired",
        "items committed by this attempt: 19",
    ]
    assert retry.title.splitlines() == [
        "migrate[1] · attempt 2 of 3 · succeeded",
        "worker: w-b",
        "started: 2025-03-04 12:00:06.300 UTC (+6.3 s)",
        "finished: 2025-03-04 12:00:07.000 UTC (+7 s)",
        "duration: 700 ms",
        "items committed by this attempt: 31",
    ]


def test_very_short_attempts_keep_a_visible_width():
    s = Story(finished=2 * 86400)
    step = s.step("blink")
    s.attempt(step, 1, AttemptStatus.SUCCEEDED, 3600, 3600.002)
    (bar,) = s.build().lane("blink").bars
    assert bar.width == timeline.MIN_BAR_W
    # Too narrow for its word inside: the word goes beside it.
    assert bar.label.text in ("#1 succeeded", "succeeded")
    assert bar.label.x > bar.x + bar.width


def test_failed_attempts_and_their_retry_gaps():
    s = Story(finished=40)
    flaky = s.step("flaky", status=StepStatus.SUCCEEDED)
    s.attempt(flaky, 1, AttemptStatus.FAILED, 1, 2, error="ValueError: boom")
    s.attempt(flaky, 2, AttemptStatus.FAILED, 4, 5, error="ValueError: boom")
    s.attempt(flaky, 3, AttemptStatus.SUCCEEDED, 9, 10)
    lane = s.build().lane("flaky")
    assert [b.css for b in lane.bars] == [
        "attempt attempt-failed",
        "attempt attempt-failed",
        "attempt attempt-succeeded",
    ]
    assert [seg.title for seg in lane.segments] == [
        "retry: attempt 2 started 2 s after attempt 1 failed: ValueError: boom",
        "retry: attempt 3 started 4 s after attempt 2 failed: ValueError: boom",
    ]
    assert all(seg.css == "tl-retry" for seg in lane.segments)


def test_resolution_marker_says_who_and_the_wait_for_the_decision():
    tl = merge_resolved_story().build()
    lane = tl.lane("merge")
    (flag,) = [m for m in lane.markers if m.kind == "resolution"]
    assert flag.x == tl.axis.x(at(120))
    assert flag.css == "mk-resolution mk-succeeded"
    assert flag.label.text == "succeeded by olivia"
    assert flag.title.splitlines()[:2] == [
        "merge: claim resolved as succeeded by olivia at 2025-03-04 12:02:00.000 UTC (+2 min)",
        "note: “merged, see PR 9”",
    ]
    (waiting,) = [seg for seg in lane.segments if seg.css == "tl-awaiting"]
    assert waiting.x == tl.axis.x(at(65)) and waiting.x2 == tl.axis.x(at(120))
    assert waiting.title.endswith("until olivia resolved it as succeeded")
    (claim,) = [m for m in lane.markers if m.kind == "claim"]
    assert "claim taken at 2025-03-04 12:00:01.010 UTC" in claim.title
    (probe,) = [m for m in lane.markers if m.kind == "probe"]
    assert probe.x == tl.axis.x(at(96)) and "probe answered “unknown”" in probe.title
    # The run lane shows the time the run waited for a decision.
    (band,) = tl.lane("run").segments
    assert (band.css, band.x, band.x2) == ("tl-awaiting", tl.axis.x(at(65)), tl.axis.x(at(120)))
    assert "by olivia" in tl.summary


def test_probe_resolution_is_labelled_as_the_probes():
    s = Story(workflow="merge-change", finished=30)
    merge = s.step("merge", kind="guarded")
    s.attempt(merge, 1, AttemptStatus.UNRESOLVED, 1, 2, error="TimeoutError")
    s.event(
        events.CLAIM_RESOLVED,
        20,
        on=merge,
        key="run/merge@1",
        outcome="failed",
        actor="probe",
        note="n",
        evidence=None,
    )
    s.attempt(merge, 2, AttemptStatus.SUCCEEDED, 21, 22)
    lane = s.build().lane("merge")
    (flag,) = [m for m in lane.markers if m.kind == "resolution"]
    assert flag.label.text == "probe: not applied"
    assert flag.css == "mk-resolution mk-failed mk-by-probe"
    assert [seg.css for seg in lane.segments] == ["tl-awaiting", "tl-retry"]
    assert lane.segments[1].title.endswith("after its claim was resolved as failed by probe")


def test_a_probe_that_gave_up_is_marked_with_its_tries():
    s = Story(workflow="merge-change-probed", finished=400)
    merge = s.step("merge", kind="guarded", status=StepStatus.UNRESOLVED)
    s.attempt(merge, 1, AttemptStatus.CRASHED, 1, 65, lease=61)
    gave_up = {"reason": "the probe never completed", "tries": 3}
    s.event(events.PROBE_GAVE_UP, 300, on=merge, key="run/merge@1", tries=3, evidence=gave_up)
    (probe,) = [m for m in s.build().lane("merge").markers if m.kind == "probe"]
    assert probe.title.splitlines()[0] == (
        "merge: probe gave up at 2025-03-04 12:05:00.000 UTC (+5 min) after 3 tries without "
        "an answer"
    )


def test_a_probe_answer_contradicting_the_resolution_is_marked_after_it():
    s = Story(workflow="merge-change-probed", finished=400)
    merge = s.step("merge", kind="guarded")
    s.attempt(merge, 1, AttemptStatus.CRASHED, 1, 65, lease=61)
    s.event(
        events.CLAIM_RESOLVED,
        100,
        on=merge,
        key="run/merge@1",
        outcome="failed",
        actor="ann",
        note="n",
        evidence=None,
    )
    s.event(
        events.PROBE_CONTRADICTS_RESOLUTION,
        250,
        on=merge,
        key="run/merge@1",
        answer="applied",
        result={"merge_id": 4},
        evidence={"merge_id": 4},
        resolved_as="failed",
        resolved_by="ann",
    )
    tl = s.build()
    (mark,) = [m for m in tl.lane("merge").markers if m.kind == "probe-disagrees"]
    assert mark.x == tl.axis.x(at(250))
    assert mark.title.splitlines() == [
        "merge: probe found the effect applied at 2025-03-04 12:04:10.000 UTC (+4 min 10 s)",
        "after the claim was resolved as failed by ann: the resolution stands",
        'evidence: {"merge_id": 4}',
    ]
    assert mark.label.text == "probe disagrees"
    assert "probe-disagrees" in set(tl.used)


def test_late_results_and_run_marks():
    s = Story(status=RunStatus.CANCELLED, finished=50)
    merge = s.step("merge", kind="guarded", status=StepStatus.UNRESOLVED)
    s.attempt(merge, 1, AttemptStatus.CRASHED, 1, 20, lease=15)
    s.event(events.CLAIM_EVIDENCE, 30, on=merge, attempt=1, key="k", evidence={"late_result": 1})
    s.event(events.RUN_CANCELLED if hasattr(events, "RUN_CANCELLED") else "run_cancelled",
            50, actor="ann", reason="wrong change")  # fmt: skip
    tl = s.build()
    (late,) = [m for m in tl.lane("merge").markers if m.kind == "late"]
    assert late.x == tl.axis.x(at(30)) and "late result from attempt 1" in late.title
    run_lane = tl.lane("run")
    assert [m.kind for m in run_lane.markers] == ["submitted", "finished", "cancelled"]
    cancelled = run_lane.markers[-1]
    assert cancelled.title.startswith("cancelled by ann at") and "wrong change" in cancelled.title
    assert [g.css for g in tl.guides] == ["guide guide-cancelled"]


def test_active_run_draws_running_attempts_to_now_and_a_due_retry():
    s = Story(status=RunStatus.RUNNING, finished=None)
    work = s.step("work", status=StepStatus.RUNNING)
    s.attempt(work, 1, AttemptStatus.RUNNING, 2)
    later = s.step("later", status=StepStatus.RETRYING, next_attempt=40)
    s.attempt(later, 1, AttemptStatus.FAILED, 1, 3, error="boom")
    s.step("never", status=StepStatus.PENDING, depends_on=("work",))
    tl = s.build(now=30)
    (running,) = tl.lane("work").bars
    assert running.css == "attempt attempt-running"
    assert running.x + running.width == tl.axis.x(at(30))
    assert "running for 28 s so far" in running.title
    (due,) = [m for m in tl.lane("later").markers if m.kind == "retry-due"]
    assert due.x == tl.axis.x(at(40))  # the axis reaches the due retry
    assert [label.text for label in tl.lane("never").labels] == ["not started: waits for work"]
    assert [g.label for g in tl.guides] == ["now"]


def test_map_with_many_batches_caps_its_lanes_and_summarizes_the_rest():
    s = Story(finished=3000)
    m = s.step("migrate", kind="transactional", batches=1000, started=1, finished=2999)
    done = {}
    for i in range(1000):
        b = s.step(f"migrate[{i}]", kind="transactional", parent=m, items=5)
        if i == 700:
            s.attempt(b, 1, AttemptStatus.CRASHED, 1 + 2.9 * i, 2 + 2.9 * i, lease=2 + 2.9 * i)
            s.attempt(b, 2, AttemptStatus.SUCCEEDED, 3 + 2.9 * i, 3.5 + 2.9 * i)
        else:
            s.attempt(b, 1, AttemptStatus.SUCCEEDED, 1 + 2.9 * i, 2 + 2.9 * i)
        done[b.pk] = 5
    collapsed = s.build(items_done=done)
    assert [lane.key for lane in collapsed.lanes] == ["run", "migrate"]
    assert collapsed.toggles == [timeline.Toggle("migrate", 1000, False, 0)]
    assert collapsed.lane("migrate").bars[0].label.text == "5000/5000 items · 1000 batches"

    tl = s.build(items_done=done, expand=["migrate"])
    batch_lanes = [lane for lane in tl.lanes if lane.kind == "batch"]
    assert len(batch_lanes) == timeline.MAX_BATCH_LANES
    # The batch with something to see is among them, in batch order.
    assert "migrate[700]" in [lane.key for lane in batch_lanes]
    assert [lane.key for lane in batch_lanes][:3] == ["migrate[0]", "migrate[1]", "migrate[2]"]
    more = tl.lanes[-1]
    assert (more.kind, more.label) == ("more", "+ 950 more batches")
    assert more.detail == "950 succeeded"
    assert tl.toggles == [timeline.Toggle("migrate", 1000, True, 50)]
    assert len(tl.lanes) == 2 + 50 + 1


def test_small_map_is_expanded_unless_collapsed():
    s, _ = crashed_batch_story()
    assert s.build().toggles == [timeline.Toggle("migrate", 3, True, 3)]
    tl = s.build(collapse=["migrate"])
    assert [lane.key for lane in tl.lanes] == ["run", "list_records", "migrate"]


def test_summary_for_screen_readers_says_where_the_worker_died():
    s, extra = crashed_batch_story()
    tl = s.build(items=extra["items"], items_done=extra["items_done"])
    assert tl.summary == (
        "Timeline of run migrate-records@1, succeeded, 8 s from submission to finish. "
        "Steps in plan order: list_records succeeded (attempt 1 succeeded); "
        "migrate succeeded (3 batches, 150 of 150 items). "
        "migrate[1] attempt 1 crashed: worker w-a died after +3.8 s (its last sign of life); "
        "its lease expired at +5.8 s and it was declared crashed at +6.1 s."
    )


# --- the drawing -------------------------------------------------------------------------------
def render_timeline(tl: timeline.Timeline) -> str:
    return render_to_string("runs/detail.html#timeline", {"timeline": tl, "toggles": []})


def test_svg_is_an_image_with_a_summary_and_a_title_on_every_bar_and_mark():
    s, extra = crashed_batch_story()
    tl = s.build(items=extra["items"], items_done=extra["items_done"])
    svg = render_timeline(tl)
    assert re.search(r'<div class="tl-frame" role="img" aria-label="Timeline of run ', svg)
    assert ' style="' not in svg and "<style" not in svg and "<script" not in svg
    # Every bar, mark and segment opens with its <title> (the tooltip with the details).
    opened = re.findall(
        r'<(?:g class="(?:bar|mk) |rect class="seg |line class="seg )[^>]*>(.{7})', svg
    )
    drawn = sum(len(lane.bars) + len(lane.markers) + len(lane.segments) for lane in tl.lanes)
    assert len(opened) == drawn and set(opened) == {"<title>"}
    assert 'class="bar attempt attempt-crashed"' in svg
    assert 'class="mk mk-crash"' in svg and ">worker died · w-a</text>" in svg


def test_svg_escapes_hostile_text():
    s = Story(finished=10)
    evil = '<script>alert("x")</script>'
    step = s.step("merge", kind="guarded")
    s.attempt(step, 1, AttemptStatus.UNRESOLVED, 1, 2, worker=evil, error=evil)
    s.event(
        events.CLAIM_RESOLVED,
        5,
        on=step,
        key="k",
        outcome="succeeded",
        actor=evil,
        note=evil,
        evidence=None,
    )
    svg = render_timeline(s.build())
    assert "<script>" not in svg
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in svg


# --- the page ----------------------------------------------------------------------------------
HTMX = {"HTTP_HX_REQUEST": "true"}
POLL = {**HTMX, "HTTP_HX_TARGET": "run-live", "HTTP_HX_TRIGGER": "run-live"}
LIVE = re.compile(r'<div id="run-live"[^>]*>')


def migrate(count: int, batch_size: int = 1, *, crash_batch: int | None = None) -> Run:
    """migrate-records executed in-process; `crash_batch`: that batch's first attempt
    is started by a worker that dies (its lease expires, the sweeper crashes it)."""
    run = engine.submit_run(
        workflow="migrate-records", input={"count": count, "batch_size": batch_size}
    )
    listing = Step.objects.get(run=run, key="list_records")
    engine.execute_step(step_id=listing.id, worker="w-list")
    if crash_batch is not None:
        batch = Step.objects.get(run=run, key=f"migrate[{crash_batch}]")
        start_attempt(step_id=batch.id, worker="w-doomed")
        factories.expire_leases()
        assert len(engine.sweep().crashed) == 1
    factories.run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    return run


def page_queries(client, run: Run, **params: str) -> tuple[int, str]:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    with CaptureQueriesContext(connection) as queries:
        response = client.get(f"/runs/{run.id}/?{query}")
    assert response.status_code == 200
    return len(queries), response.content.decode()


def test_run_page_query_count_is_fixed_for_2000_events_and_100_batches(
    operator_client, django_assert_max_num_queries
):
    small = migrate(2, crash_batch=0)
    baseline, _ = page_queries(operator_client, small)

    many_events = migrate(667)  # 3 events a batch
    total = Event.objects.filter(run=many_events).count()
    assert total >= 2000
    with django_assert_max_num_queries(baseline):
        html = folded(operator_client.get(f"/runs/{many_events.id}/").content)
    assert f"({total} events)" in html and "page 1 of 21" in html

    batches = migrate(100, crash_batch=42)
    assert Step.objects.filter(run=batches, parent__isnull=False).count() == 100
    with django_assert_max_num_queries(baseline):
        html = operator_client.get(f"/runs/{batches.id}/").content.decode()
    # Collapsed (more than 10 batches), the map's lane still shows the crash.
    assert "migrate[42]: worker died" in html and 'class="bar attempt attempt-crashed"' not in html
    # Expanded: 50 lanes of batches, the rest summarized; still the same queries.
    n, html = page_queries(operator_client, batches, expand="migrate")
    assert n == baseline
    assert html.count('<g class="lane lane-batch ') == timeline.MAX_BATCH_LANES
    assert "+ 50 more batches" in html
    # The event log alone costs less.
    with django_assert_max_num_queries(baseline - 4):
        operator_client.get(f"/runs/{many_events.id}/?type=batch_finished", **HTMX,
                            HTTP_HX_TARGET="events")  # fmt: skip
    # The event filter and the batches' toggles ask for run-view: the page's queries.
    with django_assert_max_num_queries(baseline):
        operator_client.get(f"/runs/{many_events.id}/?type=batch_finished", **HTMX,
                            HTTP_HX_TARGET="run-view")  # fmt: skip
    print(f"run page: {baseline} queries")


def test_run_page_timeline_reads_only_the_events_it_draws(operator_client):
    run = migrate(30, crash_batch=3)
    with CaptureQueriesContext(connection) as queries:
        operator_client.get(f"/runs/{run.id}/")
    event_reads = [q["sql"] for q in queries if 'FROM "runs_event"' in q["sql"]]
    timeline_read = [sql for sql in event_reads if '"runs_event"."type" IN' in sql]
    assert len(timeline_read) == 1
    assert "'batch_finished'" not in timeline_read[0] and "'claim_taken'" in timeline_read[0]


WriteEvent = Callable[..., None]


@pytest.fixture
def write_event(db) -> Iterator[WriteEvent]:
    """Writes an event in SQL, as append_one does but behind the catalogue's back, and
    removes it after the test (as only the retention job may): the autouse check
    reads every event a test leaves strictly, and these are meant not to read."""
    written: list[int] = []

    def write(run: Run, step: Step, type: str, payload: dict[str, Any], version: int = 1) -> None:
        with connection.cursor() as cursor:
            cursor.execute(
                "WITH seq AS (UPDATE runs_run SET last_seq = last_seq + 1 WHERE id = %s"
                " RETURNING last_seq)"
                " INSERT INTO runs_event (run_id, seq, type, step_id, schema_version, payload)"
                " SELECT %s, seq.last_seq, %s, %s, %s, %s::jsonb FROM seq RETURNING id",
                [run.id, run.id, type, step.id, version, json.dumps(payload)],
            )
            written.append(cursor.fetchone()[0])

    yield write
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL durable_runs.retention = 'on'")
        cursor.execute("DELETE FROM runs_event WHERE id = ANY(%s)", [written])
        cursor.execute("SET LOCAL durable_runs.retention = 'off'")


@pytest.mark.tampers  # events written in SQL that the catalogue cannot read
def test_run_page_skips_the_marks_of_events_the_catalogue_cannot_read(operator_client, write_event):
    run = migrate(2)
    step = Step.objects.get(run=run, key="list_records")
    refused = {"step": step.key, "reason": "unknown version"}
    write_event(run, step, events.STEP_REFUSED, {**refused, "worker": "w-old"})
    write_event(run, step, events.STEP_REFUSED, refused)  # no worker: the catalogue needs it
    write_event(run, step, events.STEP_REFUSED, {**refused, "worker": "w-new"}, version=2)
    resolved = {"key": "k", "actor": "mallory", "note": None, "evidence": None}
    write_event(run, step, events.CLAIM_RESOLVED, resolved)  # no outcome

    response = operator_client.get(f"/runs/{run.id}/")

    assert response.status_code == 200
    html = response.content.decode()
    # The one refusal the catalogue reads is marked; the rest of the drawing is there.
    (title,) = re.findall(r'<g class="mk mk-refused"[^>]*>\s*<title>([^<]*)', html)
    assert title.startswith("list_records: refused by worker w-old at ")
    assert "mk-resolution" not in html and "was resolved as" not in html
    assert 'class="bar attempt attempt-succeeded"' in html


def test_active_run_page_polls_its_live_part_and_a_finished_one_does_not(operator_client):
    active = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    html = folded(operator_client.get(f"/runs/{active.id}/").content)
    (live,) = LIVE.findall(html)
    assert 'hx-trigger="every 5s, poll-now"' in live and "data-poll" in live
    assert f'hx-get="/runs/{active.id}/?"' in live and "hx-include" not in live
    # The poll asks for the view in effect (its URL's parameters, the empty ones left out).
    html = operator_client.get(f"/runs/{active.id}/?type=step_queued&collapse=x&page=").content
    (live,) = LIVE.findall(folded(html))
    assert f'hx-get="/runs/{active.id}/?type=step_queued&amp;collapse=x"' in live

    # The poll's answer: the live part (still polling), the header's status out of
    # band, no event log.
    poll = folded(operator_client.get(f"/runs/{active.id}/", **POLL).content)
    assert 'hx-trigger="every 5s, poll-now"' in LIVE.findall(poll)[0]
    assert '<span id="run-status" class="run-status" hx-swap-oob="true">' in poll
    assert 'id="events"' not in poll and "<html" not in poll

    factories.run_queued(active)
    # The poll that sees the run finished: no trigger any more (polling stops), and
    # the final event log and operations come along out of band.
    poll = folded(operator_client.get(f"/runs/{active.id}/", **POLL).content)
    (live,) = LIVE.findall(poll)
    assert "hx-trigger" not in live and "data-poll" not in live
    assert '<section id="events" aria-label="history" hx-swap-oob="true">' in poll
    assert '<div id="run-actions" class="run-actions" hx-swap-oob="true">' in poll
    assert "run_succeeded" in poll

    html = folded(operator_client.get(f"/runs/{active.id}/").content)
    (live,) = LIVE.findall(html)
    assert "hx-trigger" not in live and "data-poll" not in live


def test_batches_toggle_keeps_the_page_state_in_the_url(operator_client):
    run = migrate(3, crash_batch=1)
    html = operator_client.get(f"/runs/{run.id}/?type=attempt_crashed").content.decode()
    assert 'href="?type=attempt_crashed&amp;collapse=migrate#timeline"' in html
    assert 'aria-expanded="true"' in html
    # A toggle asks for run-view with every parameter in effect; the answer renders
    # the toggles, the event filter's hidden fields and the poll from that query.
    html = operator_client.get(
        f"/runs/{run.id}/?type=attempt_crashed&collapse=migrate", **HTMX, HTTP_HX_TARGET="run-view"
    ).content.decode()
    assert html.startswith('<div id="run-view">') and "<html" not in html
    assert 'data-lane="migrate[1]"' not in html and 'data-lane="migrate"' in html
    assert "Show the 3 batches of migrate" in html
    assert 'href="?type=attempt_crashed#timeline"' in html
    assert '<input type="hidden" name="collapse" value="migrate">' in html
    assert '<option value="attempt_crashed" selected>' in html
    assert "hx-swap-oob" not in html  # the event log is part of the view, not out of band


def test_toggle_url_names_a_step_only_against_its_default():
    big = timeline.Toggle("migrate", 500, expanded=False, shown=0)
    small = timeline.Toggle("migrate", 4, expanded=True, shown=4)
    assert views.toggle_url(QueryDict("type=x"), big) == "?type=x&expand=migrate"
    assert views.toggle_url(QueryDict("expand=migrate"), replace(big, expanded=True)) == "?"
    assert views.toggle_url(QueryDict(""), small) == "?collapse=migrate"
    # An empty parameter (a form sends its every field) is not carried on.
    assert views.toggle_url(QueryDict("type=&type=&page="), small) == "?collapse=migrate"
    assert views.toggle_url(
        QueryDict("collapse=migrate&page=2"), replace(small, expanded=False)
    ) == ("?page=2")


def test_event_log_filters_by_type_and_pretty_prints_payloads(operator_client):
    run = migrate(3, crash_batch=1)
    html = operator_client.get(f"/runs/{run.id}/?type=attempt_crashed").content.decode()
    events_part = html[html.index('<section id="events"') :]
    assert events_part.count('<tr class="ev ev-') == 1
    assert '<tr class="ev ev-attempt_crashed">' in events_part
    assert '<option value="attempt_crashed" selected>attempt_crashed (1)</option>' in html
    assert "worker: w-doomed" in events_part  # the payload's telling fields, in a line
    assert "&quot;worker&quot;: &quot;w-doomed&quot;" in events_part  # and pretty-printed
    assert '<details><summary class="muted">payload</summary>' in events_part
    partial = operator_client.get(
        f"/runs/{run.id}/?type=step_started", **HTMX, HTTP_HX_TARGET="events"
    ).content.decode()
    assert partial.startswith('\n<section id="events"') or partial.lstrip().startswith(
        '<section id="events"'
    )
    assert partial.count('<tr class="ev ev-step_started">') == 5  # list_records, 3 + 1 retry


def test_run_page_escapes_hostile_payloads_everywhere(operator_client):
    evil = '<script>alert("owned")</script>'
    claim = factories.crashed_merge()
    resolve_claim(claim, "failed", actor=evil, note=evil)
    step = Step.objects.get(run=claim.run_id)
    engine.execute_step(step_id=step.id, worker=evil)
    html = operator_client.get(f"/runs/{claim.run_id}/").content.decode()
    assert evil not in html
    assert "&lt;script&gt;alert(&quot;owned&quot;)&lt;/script&gt;" in html
    start = html.index('<svg class="timeline"')
    svg = html[start : html.index("</svg>", start)]
    assert "&lt;script&gt;" in svg  # in the titles and labels of the timeline


def test_run_page_steps_table_lists_attempts_one_under_another(operator_client):
    run = migrate(3, crash_batch=1)
    html = folded(operator_client.get(f"/runs/{run.id}/").content)
    table = html[html.index('<table class="steps">') : html.index("</table>")]
    assert "2 batches succeeded at the first attempt; 1 with more to read:" in table
    crashed = table[table.index('<li class="attempt-line attempt-line-crashed">') :]
    crashed = crashed[: crashed.index("</li>")]
    assert "w-doomed" in crashed and "last sign of life <time" in crashed
    assert "lease expired <time" in crashed and "declared crashed <time" in crashed
    assert table.index("attempt-line-crashed") < table.index(
        "attempt-line-succeeded", table.index("attempt-line-crashed")
    )


def test_run_page_counts_only_the_claims_that_wait_for_a_decision(operator_client):
    run = factories.raised("fan-out")
    resolve_claim(Claim.objects.get(run=run), "failed", actor="ann", note="never deployed")
    factories.run_queued(run)  # the retry times out again: a second, unresolved claim
    html = operator_client.get(f"/runs/{run.id}/").content.decode()
    assert "This run waits for a decision on 1 claim below." in html
    svg = html[html.index('<svg class="timeline"') :]
    assert ">failed by ann</text>" in svg
    assert svg.count('data-mark="claim"') == 2


def test_a_cancel_ended_by_its_compensations_says_so_and_names_no_canceller():
    s = Story(status=RunStatus.CANCELLED, finished=60)
    work = s.step("work", status=StepStatus.SUCCEEDED)
    s.attempt(work, 1, AttemptStatus.SUCCEEDED, 1, 10)
    s.event(events.RUN_CANCELLED, 40, actor="ann", reason="wrong change")
    s.event(events.RUN_CANCELLED, 60, compensated=True)
    tl = s.build()
    first, second = [m for m in tl.lane("run").markers if m.kind == "cancelled"]
    assert first.title.startswith("cancelled by ann at")
    assert (
        second.title.startswith("ended cancelled at") and "after its compensations" in second.title
    )
    assert "None" not in tl.summary and "Its compensations finished" in tl.summary


def test_an_attempt_stopped_at_its_timeout_is_marked_with_how_it_was_stopped():
    s = Story(status=RunStatus.SUCCEEDED, finished=40)
    hang = s.step("hang", status=StepStatus.SUCCEEDED)
    s.attempt(hang, 1, AttemptStatus.FAILED, 1, 3, error="StepTimedOut: ran past 2 s")
    s.event(events.ATTEMPT_TIMED_OUT, 3, on=hang, attempt=1, step="hang", seconds=2.0)
    s.attempt(hang, 2, AttemptStatus.CRASHED, 5, 20, lease=8)
    s.event(
        events.ATTEMPT_TIMED_OUT, 20, on=hang, attempt=2, step="hang", seconds=2.0, replaced=True
    )
    s.attempt(hang, 3, AttemptStatus.SUCCEEDED, 21, 22)
    tl = s.build()
    first, second = [m for m in tl.lane("hang").markers if m.kind == "timed-out"]
    assert first.x == tl.axis.x(at(3))
    assert first.title.startswith("hang attempt 1: timed out after 2 s at")
    assert second.title.endswith("its call did not stop, so its worker process was replaced")
    assert "timed-out" in set(tl.used)


# --- the run's story: pauses, failures and reopens, attempts "of" what they were --------------
def rel(text: str) -> str:
    """Times as their offset from the submission alone ("+5 s"), without the absolute."""
    return re.sub(r"\d{4}-\d\d-\d\d [\d:.]+ UTC \((\+[^)]*)\)", r"\1", text)


def test_a_workflow_pause_is_its_own_mark_not_a_retry_wait():
    s = Story(finished=40)
    work = s.step("work")
    s.attempt(work, 1, AttemptStatus.FAILED, 1, 2, error="boom")
    s.attempt(work, 2, AttemptStatus.SUCCEEDED, 30, 31)
    pause = timeline.PauseSpan(
        step="", actor="ann", reason="deploy freeze", since=at(5), until=at(25), resumed_by="bob"
    )
    other = timeline.PauseSpan(step="elsewhere", actor="cy", reason="not ours", since=at(6))
    tl = s.build(pauses=[pause, other])
    (band,) = [g for g in tl.lane("run").segments if g.css == "tl-paused"]
    assert band.x == tl.axis.x(at(5)) and band.x2 == tl.axis.x(at(25))
    assert rel(band.title).startswith(
        "workflow paused by ann: deploy freeze\nfrom +5 s until +25 s"
    )
    assert "resumed by bob (20 s)" in band.title
    # The step's wait says a pause held it, and the pause is drawn over it.
    (held,) = [g for g in tl.lane("work").segments if g.css == "tl-paused tl-held"]
    assert held.x == tl.axis.x(at(5)) and held.x2 == tl.axis.x(at(25))
    (wait,) = [g for g in tl.lane("work").segments if g.css == "tl-retry"]
    assert "(held back 20 s by a pause)" in wait.title
    assert "paused" in tl.used
    assert not any("not ours" in g.title for g in tl.lane("run").segments)
    assert "Its workflow was paused by ann at +5 s until +25 s: deploy freeze." in tl.summary
    html = folded(render_timeline(tl))
    assert "<li>workflow paused by ann: deploy freeze from +5 s until +25 s" in rel(html)
    assert "paused by an operator (or a breaker)</li>" in html


def reopened_story(**reopen: Any) -> Story:
    """charge failed three times (of 3), the run failed; ann's bulk batch 7 retried it,
    which raised its max attempts to 6, and attempt 4 succeeded."""
    s = Story(finished=60)
    charge = s.step("charge", max_attempts=6)
    for n in (1, 2, 3):
        s.attempt(charge, n, AttemptStatus.FAILED, 2 * n - 1, 2 * n, error="card declined")
    s.event(events.RUN_FAILED, 6, error="charge failed: card declined")
    s.event(events.RUN_REOPENED, 50, actor="ann", steps=["charge"], status="running", **reopen)
    s.attempt(charge, 4, AttemptStatus.SUCCEEDED, 52, 53)
    return s


def test_a_bulk_reopen_is_said_as_who_retried_in_which_batch():
    tl = reopened_story(reason="card fixed (batch 7)", max_attempts={"charge": 3}).build()
    run = tl.lane("run")
    (reopened,) = [m for m in run.markers if m.kind == "reopened"]
    assert rel(reopened.title).startswith("retried by ann in batch 7: card fixed at +50 s")
    assert (
        reopened.batch == 7
        and reopened.label
        and reopened.label.text == ("retried by ann in batch 7")
    )
    *retries, wait = [g for g in tl.lane("charge").segments if g.css == "tl-retry"]
    assert all(r.title.startswith("retry: ") for r in retries)  # the engine's, before
    assert rel(wait.title).startswith("retried by ann in batch 7: card fixed at +50 s\n")
    assert not wait.title.startswith("retry:") and wait.batch == 7
    assert "It was retried by ann in batch 7: card fixed at +50 s (steps charge)." in tl.summary
    html = folded(render_timeline(tl))
    assert "<li>retried by ann in batch 7: card fixed at +50 s" not in rel(html)  # linked:
    assert (
        '<li>retried by ann in <a href="/runs/batches/7/">batch 7</a>: card fixed at +50 s'
        in rel(html)
    )


def test_a_person_s_reopen_names_them_and_links_no_batch():
    tl = reopened_story(reason="retry after the fix").build()
    (reopened,) = [m for m in tl.lane("run").markers if m.kind == "reopened"]
    assert rel(reopened.title).startswith("retried by ann: retry after the fix at +50 s")
    assert reopened.batch is None
    assert "/runs/batches/" not in render_timeline(tl)


def test_the_run_lane_breaks_where_it_stood_failed_until_the_reopen():
    tl = reopened_story(reason="card fixed (batch 7)").build()
    run = tl.lane("run")
    assert [m.kind for m in run.markers] == ["submitted", "finished", "run-failed", "reopened"]
    failed = run.markers[2]
    assert failed.x == tl.axis.x(at(6)) and rel(failed.title).startswith("run failed at +6 s")
    assert "error: charge failed: card declined" in failed.title
    # Two pieces of the run's bar, with the failed stretch between them.
    first, second = run.bars
    assert first.x + first.width == tl.axis.x(at(6)) and second.x == tl.axis.x(at(50))
    assert second.title.startswith("run 00000000-0000-0000-0000-000000000007, reopened")
    (down,) = [g for g in run.segments if g.css == "tl-down"]
    assert (down.x, down.x2) == (tl.axis.x(at(6)), tl.axis.x(at(50)))
    assert rel(down.title).startswith(
        "stood failed for 44 s, from +6 s until it was retried by ann"
    )
    assert "It failed at +6 s." in tl.summary
    said = [d.text for d in run.details]
    assert max(said.index(failed.title), said.index(down.title)) < said.index(run.markers[3].title)
    html = folded(render_timeline(tl))
    assert "failed, until it was retried</li>" in html and "the run failed</li>" in html


def test_attempts_are_of_the_max_attempts_they_had_then():
    tl = reopened_story(reason="x", max_attempts={"charge": 3}).build()
    titles = [b.title.split("\n")[0] for b in tl.lane("charge").bars]
    assert titles == [
        "charge · attempt 1 of 3 · failed",
        "charge · attempt 2 of 3 · failed",
        "charge · attempt 3 of 3 · failed",
        "charge · attempt 4 of 6 · succeeded",
    ]
    # A reopen recorded before it kept the value: the current one, as before.
    old = reopened_story(reason="x").build()
    assert old.lane("charge").bars[0].title.startswith("charge · attempt 1 of 6 ·")


def test_a_retry_of_the_run_records_the_max_attempts_it_raised(operator_client, monkeypatch):
    from tests.support.batches import failed_runs

    (run,) = failed_runs(monkeypatch, 1)
    step = Step.objects.get(run=run, parent__isnull=True)
    before = step.max_attempts
    engine.retry_run(run_id=run.id, actor="ann", reason="fixed upstream (batch 12)")
    reopen = Event.objects.get(run=run, type=events.RUN_REOPENED)
    assert reopen.payload["max_attempts"] == {step.key: before}
    step.refresh_from_db()
    assert step.max_attempts > before
    html = folded(operator_client.get(f"/runs/{run.id}/").content)
    assert f"attempt 1 of {before} ·" in html and f"of {step.max_attempts} ·" not in html
    assert "retried by admin" not in html
    assert '<li>retried by ann in <a href="/runs/batches/12/">batch 12</a>: fixed upstream' in html
    assert "the run failed</li>" in html and "retried (reopened) by an operator</li>" in html


def test_the_run_page_shows_a_pause_that_held_the_run(operator_client):
    run = engine.submit_run(workflow="pure-chain", input={})
    paused = engine.pause(workflow="pure-chain", actor="ann", reason="db maintenance")
    engine.resume(pause_id=paused.pk, actor="bob", reason="done")
    html = folded(operator_client.get(f"/runs/{run.id}/").content)
    assert "<li>workflow paused by ann: db maintenance from +" in rel(html)
    assert "resumed by bob" in html and "Its workflow was paused by ann at +" in html
    # Another workflow's pause is not this run's.
    engine.pause(workflow="migrate-records", actor="cy", reason="not this one")
    assert "not this one" not in operator_client.get(f"/runs/{run.id}/").content.decode()
