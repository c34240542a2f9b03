"""Check again: an operator runs a claim's probe now (runs.engine.probe.reprobe_claim)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection

from examples.fakes import CodeHost
from runs import engine
from runs.engine import reprobe_claim, resolve_claim
from runs.errors import ClaimAlreadyResolved, ClaimNotFound, NoProbe, ProbeNotDue
from runs.models import Claim, Event, Run
from runs.record import events
from runs.states import ClaimStatus, RunStatus
from tests.support.factories import crashed_merge, operator, raised


def db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def make_due(claim: Claim) -> None:
    Claim.objects.filter(pk=claim.pk).update(probe_after=db_now() - timedelta(seconds=1))


def test_reprobe_claim_before_probe_after_is_refused_saying_until_when(db, settings):
    settings.RUNS_PROBE_GRACE_SECONDS = 30
    claim = crashed_merge(workflow="merge-change-probed")  # lease ended 1s ago: 29s to go
    claim.refresh_from_db()
    events_before = Event.objects.count()

    with pytest.raises(ProbeNotDue) as refused:
        reprobe_claim(claim_id=claim.id, actor=operator("ann"))

    assert refused.value.until == claim.probe_after
    assert 28 <= refused.value.seconds <= 29
    assert str(refused.value) == (
        f"claim {claim.key} cannot be probed before "
        f"{claim.probe_after.isoformat(timespec='seconds')} (in 29s): its attempt's lease "
        "ended only recently, and a paused worker's effect may still land"
    )
    claim.refresh_from_db()
    assert (claim.status, claim.probed_at) == (ClaimStatus.UNRESOLVED, None)
    assert Event.objects.count() == events_before


def test_reprobe_claim_applied_resolves_it_as_the_probe_naming_who_asked(db):
    claim = crashed_merge(change_id=3, workflow="merge-change-probed")
    merge = CodeHost().merge(change_id=3, run_id=str(claim.run_id))  # it did happen
    make_due(claim)

    outcome = reprobe_claim(claim_id=claim.id, actor=operator("ann"))

    assert (outcome.answer, outcome.word, outcome.superseded) == ("applied", "applied", "")
    assert (
        outcome.summary == "the probe found the effect applied: the claim is resolved as succeeded"
    )
    claim.refresh_from_db()
    assert (claim.status, claim.resolved_by, claim.resolution_note, claim.result) == (
        ClaimStatus.SUCCEEDED,
        "probe",
        "probe found the effect applied (checked again at the request of ann)",
        merge,
    )
    assert Run.objects.get(pk=claim.run_id).status == RunStatus.SUCCEEDED
    asked = Event.objects.filter(run_id=claim.run_id, type=events.PROBE_REQUESTED).order_by("seq")
    assert [e.payload for e in asked] == [
        {"claim_id": claim.id},  # the sweeper's, when the claim became unresolved
        {"claim_id": claim.id, "key": claim.key, "requested_by": "ann"},
    ]
    resolved = Event.objects.get(run_id=claim.run_id, type=events.CLAIM_RESOLVED)
    assert (resolved.payload["actor"], resolved.payload["evidence"]["merge_id"]) == (
        "probe",
        merge["merge_id"],
    )


def test_reprobe_claim_not_applied_resolves_it_as_failed_and_retries(db):
    claim = crashed_merge(workflow="merge-change-probed")
    make_due(claim)

    outcome = reprobe_claim(claim_id=claim.id, actor="ann")

    assert (outcome.answer, outcome.resolution.step_status) == ("not_applied", "queued")
    claim.refresh_from_db()
    assert (claim.status, claim.resolved_by) == (ClaimStatus.FAILED, "probe")


def test_reprobe_claim_unknown_leaves_it_unresolved_and_records_the_answer(db):
    run = raised("fan-out")  # its probe cannot tell; due at once (the step raised)
    claim = Claim.objects.get(run=run)
    assert engine.probe_claim(claim_id=claim.id) == "unknown"  # the worker's probe

    outcome = reprobe_claim(claim_id=claim.id, actor=operator("bob"))  # and again

    assert (outcome.answer, outcome.resolution) == ("unknown", None)
    assert outcome.evidence == {"reason": "code host audit log unavailable"}
    assert outcome.summary == "the probe could not tell: code host audit log unavailable"
    claim.refresh_from_db()
    assert claim.status == ClaimStatus.UNRESOLVED
    assert claim.evidence == {"probe": {"reason": "code host audit log unavailable"}}
    answers = Event.objects.filter(run=run, type=events.PROBE_INCONCLUSIVE).order_by("seq")
    assert [e.payload for e in answers] == [
        {"key": claim.key, "evidence": {"reason": "code host audit log unavailable"}},
        {
            "key": claim.key,
            "evidence": {"reason": "code host audit log unavailable"},
            "requested_by": "bob",
        },
    ]


def test_reprobe_claim_without_a_probe_or_unresolved_claim_is_refused(db):
    claim = crashed_merge()
    with pytest.raises(NoProbe, match="step merge of merge-change v1 declares no probe"):
        reprobe_claim(claim_id=claim.id, actor="ann")
    resolve_claim(claim.id, "failed", actor="ann", note="not merged")
    with pytest.raises(ClaimAlreadyResolved, match="already resolved as failed by ann"):
        reprobe_claim(claim_id=claim.id, actor="bob")
    with pytest.raises(ClaimNotFound):
        reprobe_claim(claim_id=999999, actor="bob")
