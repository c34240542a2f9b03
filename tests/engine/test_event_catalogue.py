"""The event catalogue: one frozen, keyword-only class per stored type string
(docs/architecture.md#the-event-catalogue). No database: these are the classes alone."""

from __future__ import annotations

import dataclasses
import uuid

import pytest

from runs.record import events as ev
from runs.record.history import CLAIM_STATUS_BY_EVENT, STEP_STATUS_BY_EVENT, Projection, apply

# The strings stored in runs_event.type: changing one orphans every event stored with it.
STORED_TYPES = {
    "run_submitted",
    "run_started",
    "run_succeeded",
    "run_failed",
    "run_cancelled",
    "run_reopened",
    "run_deadline_passed",
    "run_needs_reconciliation",
    "step_queued",
    "step_started",
    "step_succeeded",
    "step_retrying",
    "step_failed",
    "attempt_timed_out",
    "step_unresolved",
    "step_refused",
    "step_waiting_for_slot",
    "attempt_crashed",
    "plan_expanded",
    "batch_finished",
    "claim_taken",
    "claim_succeeded",
    "claim_failed",
    "claim_unresolved",
    "claim_abandoned",
    "claim_resolved",
    "claim_evidence",
    "late_result_after_resolution",
    "probe_contradicts_resolution",
    "probe_requested",
    "probe_inconclusive",
    "probe_gave_up",
    "run_resumed",
    "run_waiting",
    "run_woken",
    "step_waiting",
    "step_skipped",
    "signal_received",
    "signal_consumed",
    "run_compensating",
    "steps_withdrawn",
    "compensation_planned",
}


def test_every_stored_type_has_one_class_and_no_class_shares_a_type():
    classes = [c for c in vars(ev).values() if isinstance(c, type) and issubclass(c, ev.Event)]
    types = [c.TYPE for c in classes if c not in (ev.Event, ev.Unknown)]
    assert len(types) == len(set(types))
    assert set(types) == STORED_TYPES == set(ev.CATALOGUE)
    assert all(ev.CATALOGUE[c.TYPE] is c for c in classes if c.TYPE)


@pytest.mark.parametrize("cls", list(ev.CATALOGUE.values()), ids=lambda c: c.TYPE)
def test_every_class_is_frozen_keyword_only_and_slotted(cls):
    params = cls.__dataclass_params__  # type: ignore[attr-defined]
    assert params.frozen
    assert all(f.kw_only for f in dataclasses.fields(cls))
    assert "__slots__" in vars(cls)
    assert cls.FIELDS == {f.name for f in dataclasses.fields(cls)}


def test_a_key_written_sometimes_is_left_out_when_it_is_its_default():
    assert ev.StepRetrying(step="a", error="e", delay=1.0).as_payload() == {
        "step": "a",
        "error": "e",
        "delay": 1.0,
    }
    assert ev.StepRetrying(step="a", error="e", delay=1.0, deferred=True).as_payload()["deferred"]
    # Present with null is not absent: the probe's result of an effect that returned None.
    contradicts = {"key": "k", "evidence": {}, "resolved_as": "failed", "resolved_by": "ann"}
    applied = ev.ProbeContradictsResolution(answer="applied", result=None, **contradicts)
    assert applied.as_payload() == {"answer": "applied", "result": None, **contradicts}
    not_applied = ev.ProbeContradictsResolution(answer="not_applied", **contradicts)
    assert "result" not in not_applied.as_payload()
    # Always-written fields stay, None or not (the stored shape of today).
    waiting = ev.StepWaiting(step="w", signal=None, wake_at=None).as_payload()
    assert waiting == {"step": "w", "signal": None, "wake_at": None}


def test_events_stored_before_a_field_was_added_still_read():
    submitted = ev.read("run_submitted", {"workflow": "w", "version": 1, "input": {}}, 1)
    assert submitted == ev.RunSubmitted(workflow="w", version=1, input={}, plan=[])
    retrying = ev.read("step_retrying", {"step": "a", "error": "e", "delay": 2}, 1)
    assert isinstance(retrying, ev.StepRetrying) and retrying.deferred is False


def test_lenient_reads_skip_what_they_do_not_know_and_strict_reads_refuse_it():
    stored = {"step": "a", "added_by_a_newer_release": 1}
    assert ev.read("step_queued", stored, 1) == ev.StepQueued(step="a")
    with pytest.raises(ev.CatalogueError, match="added_by_a_newer_release"):
        ev.read("step_queued", stored, 1, strict=True)
    assert ev.read("a_newer_type", {"x": 1}, 1) == ev.Unknown(type="a_newer_type", data={"x": 1})
    with pytest.raises(ev.CatalogueError):
        ev.read("a_newer_type", {"x": 1}, 1, strict=True)
    with pytest.raises(ev.CatalogueError, match="error"):
        ev.read("step_failed", {"step": "a"}, 1)  # a field it needs is missing


def test_an_event_is_checked_where_it_is_built_and_only_catalogue_events_are_written():
    run_id = uuid.uuid4()  # never reached: the event is refused before any statement
    with pytest.raises(TypeError, match="eror"):
        ev.StepFailed(step="a", eror="boom")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="error"):
        ev.StepFailed(step="a")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="catalogue event"):
        ev.append_event(run_id, "step_failed")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="reason"):
        ev.append_event(run_id, ev.StepFailed(step="a", error="e"), reason="x")  # type: ignore[call-arg]


def test_the_projection_files_each_status_event_under_its_field():
    # history.apply reads `step` of the step status events and `key` of the claim ones.
    for type_ in STEP_STATUS_BY_EVENT:
        assert "step" in ev.CATALOGUE[type_].FIELDS
    for type_ in CLAIM_STATUS_BY_EVENT:
        assert "key" in ev.CATALOGUE[type_].FIELDS
    p = Projection()
    apply(p, ev.StepSkipped(step="s"))
    apply(p, ev.ClaimAbandoned(key="k"))
    assert (p.steps, p.claims) == ({"s": "skipped"}, {"k": "abandoned"})
