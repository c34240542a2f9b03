"""A probe's definite answer that arrives after someone resolved its claim the other
way: the resolution stands (it is final), and the disagreement is recorded as a
`probe_contradicts_resolution` event with the probe's evidence, for the
reconciliation pages, instead of a line in the log."""

from __future__ import annotations

import logging

from examples.fakes import CodeHost
from runs import engine
from runs.engine.tools import probe_module as probe
from runs.models import Claim, Event
from runs.record import events, export, export_check
from runs.record.history import verify_run
from runs.states import ClaimStatus
from tests.support.factories import crashed_merge, operator, probe_contradicting_resolution


def test_a_probe_answer_contradicting_the_resolution_is_recorded_as_an_event(db, caplog):
    with caplog.at_level(logging.WARNING, logger="runs.engine.policies.probe"):
        claim = probe_contradicting_resolution(change_id=7)

    assert (claim.status, claim.resolved_by, claim.resolution_note) == (
        ClaimStatus.FAILED,
        "ann",
        "no merge seen",
    )  # the resolution stands
    (event,) = Event.objects.filter(run_id=claim.run_id, type=events.PROBE_CONTRADICTS_RESOLUTION)
    merge = CodeHost().find_merge(change_id=7, run_id=str(claim.run_id))
    assert event.step_id == claim.step_id
    assert event.payload == {
        "key": claim.key,
        "answer": "applied",
        "result": {"merge_id": merge.id, "change_id": 7},
        "evidence": {"merge_id": merge.id, "merged_at": merge.merged_at.isoformat()},
        "resolved_as": "failed",
        "resolved_by": "ann",
    }
    assert f"probe of claim {claim.key} found the effect applied after it was resolved" in (
        caplog.text
    )
    assert verify_run(claim.run_id) == []  # history: the event changes no state
    doc = export.build(claim.run_id, exported_by="ann")
    exported = [e for e in doc["history"]["events"] if e["type"] == event.type]
    assert [e["payload"] for e in exported] == [event.payload]
    assert export_check.problems_of(doc) == []
    assert export_check.differences_from_database(doc) == []


def test_a_probe_answer_agreeing_with_the_resolution_records_nothing(db):
    claim = crashed_merge(change_id=8, workflow="merge-change-probed")  # no merge: not applied
    Claim.objects.filter(pk=claim.pk).update(probe_after=None)
    taken = probe._take(claim.id)
    engine.resolve_claim(claim.id, "failed", actor=operator("ann"), note="no merge seen")
    asked = Claim.objects.select_related("run", "step").get(pk=claim.pk)

    outcome = probe.ask_probe(asked, engine.probe_of(asked.run, asked.step), taken=taken)

    assert (outcome.answer, bool(outcome.superseded), outcome.contradicts) == (
        "not_applied",
        True,
        False,
    )
    assert not Event.objects.filter(type=events.PROBE_CONTRADICTS_RESOLUTION).exists()
