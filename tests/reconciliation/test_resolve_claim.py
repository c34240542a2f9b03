"""resolve_claim(): the only writer of claim outcomes after uncertainty."""

from __future__ import annotations

import threading

import pytest
from django.contrib.auth.models import User
from django.db import connection

from reconciliation.services import (
    ClaimAlreadyResolved,
    ClaimNotFound,
    ClaimNotUnresolved,
    InvalidResolution,
    resolve_claim,
)
from runs import engine
from runs.engine.tools import start_attempt
from runs.models import Claim, Event, Run, Step
from runs.record import events
from runs.states import ClaimStatus, RunStatus, StepStatus
from tests.support.factories import enter_effect


def unresolved_merge(change_id: int = 1) -> Claim:
    """A merge-change run whose worker died mid-effect: one unresolved claim."""
    run = engine.submit_run(workflow="merge-change", input={"change_id": change_id})
    enter_effect(start_attempt(step_id=Step.objects.get(run=run).id, worker="dead"))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_attempt SET lease_expires_at = now() - interval '1 second' "
            "WHERE status = 'running'"
        )
    engine.sweep()
    claim = Claim.objects.get(run=run)
    assert claim.status == ClaimStatus.UNRESOLVED
    return claim


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"outcome": "maybe"}, InvalidResolution, "outcome must be 'succeeded' or 'failed'"),
        ({"note": "  "}, InvalidResolution, "needs a note"),
        ({"actor": ""}, InvalidResolution, "needs an actor"),
        ({"outcome": "failed", "result": {"x": 1}}, InvalidResolution, "has no result"),
        ({"result": {1, 2}}, InvalidResolution, "result must be JSON-serializable"),
    ],
)
def test_resolve_claim_refuses_bad_input_and_changes_nothing(db, kwargs, error, message):
    claim = unresolved_merge()
    events_before = Event.objects.count()
    args = {"outcome": "succeeded", "actor": "ann", "note": "seen on host"} | kwargs
    outcome = args.pop("outcome")
    with pytest.raises(error, match=message):
        resolve_claim(claim, outcome, **args)
    claim.refresh_from_db()
    assert (claim.status, claim.resolved_at) == (ClaimStatus.UNRESOLVED, None)
    assert Event.objects.count() == events_before


def test_resolve_claim_unknown_or_not_unresolved(db):
    with pytest.raises(ClaimNotFound):
        resolve_claim(999999, "failed", actor="ann", note="x")
    run = engine.submit_run(workflow="charge-payment", input={"amount": 1})
    started = start_attempt(step_id=Step.objects.get(run=run).id, worker="w")
    with pytest.raises(ClaimNotUnresolved, match="is in_flight, not unresolved"):
        resolve_claim(started.claim, "failed", actor="ann", note="x")


def test_resolve_claim_records_user_note_and_evidence_and_resumes_run(db):
    claim = unresolved_merge()
    user = User.objects.create(username="olga")

    resolution = resolve_claim(
        claim,
        "succeeded",
        actor=user,
        note="merged as 4f2a",
        result={"merge_id": 1},
        evidence={"commit": "4f2a"},
    )

    claim.refresh_from_db()
    assert (claim.status, claim.resolved_by, claim.resolution_note, claim.result) == (
        ClaimStatus.SUCCEEDED,
        "olga",
        "merged as 4f2a",
        {"merge_id": 1},
    )
    assert claim.evidence == {"resolution": {"commit": "4f2a"}}
    assert resolution.run_status == RunStatus.SUCCEEDED
    event = Event.objects.get(run=claim.run, type=events.CLAIM_RESOLVED)
    assert event.payload == {
        "key": claim.key,
        "outcome": "succeeded",
        "actor": "olga",
        "note": "merged as 4f2a",
        "evidence": {"commit": "4f2a"},
    }


def test_failed_resolution_requeues_with_new_claim_generation(db):
    claim = unresolved_merge()
    resolution = resolve_claim(claim, "failed", actor="ann", note="not on host")
    step = Step.objects.get(pk=claim.step_id)
    assert (resolution.step_status, step.claim_generation) == (StepStatus.QUEUED, 2)
    assert Run.objects.get(pk=claim.run_id).status == RunStatus.RUNNING
    retry = start_attempt(step_id=step.id, worker="w")
    assert retry.claim.key == f"{claim.key}/retry-2"


def test_failed_resolution_without_attempts_left_fails_run(db):
    claim = unresolved_merge()
    Step.objects.filter(pk=claim.step_id).update(max_attempts=1)
    resolution = resolve_claim(claim, "failed", actor="ann", note="not on host")
    assert (resolution.step_status, resolution.run_status) == (
        StepStatus.FAILED,
        RunStatus.FAILED,
    )


def test_a_resolution_cannot_be_edited_afterwards(db):
    from django.db import IntegrityError, transaction

    claim = unresolved_merge()
    resolve_claim(claim, "failed", actor="ann", note="not on host")
    with pytest.raises(IntegrityError, match="a resolution cannot be changed"):
        with transaction.atomic():
            Claim.objects.filter(pk=claim.pk).update(resolution_note="edited")
    with pytest.raises(ClaimAlreadyResolved, match="already resolved as failed by ann at"):
        resolve_claim(claim, "succeeded", actor="bob", note="actually merged")


@pytest.mark.django_db(transaction=True)
def test_two_concurrent_resolutions_exactly_one_wins():
    claim = unresolved_merge()
    barrier = threading.Barrier(2)
    outcomes: dict[str, object] = {}

    def resolve(actor: str, outcome: str) -> None:
        barrier.wait()
        try:
            outcomes[actor] = resolve_claim(claim.pk, outcome, actor=actor, note=f"by {actor}")
        except ClaimAlreadyResolved as exc:
            outcomes[actor] = exc
        finally:
            connection.close()

    threads = [
        threading.Thread(target=resolve, args=("ann", "succeeded")),
        threading.Thread(target=resolve, args=("bob", "failed")),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    losers = [a for a, o in outcomes.items() if isinstance(o, ClaimAlreadyResolved)]
    winners = [a for a in outcomes if a not in losers]
    assert len(winners) == 1 and len(losers) == 1
    claim.refresh_from_db()
    assert claim.resolved_by == winners[0]
    assert f"by {winners[0]} at" in str(outcomes[losers[0]])
    assert Event.objects.filter(run=claim.run, type=events.CLAIM_RESOLVED).count() == 1
