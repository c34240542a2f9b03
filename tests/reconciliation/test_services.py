"""reconciliation.services: taking claims, resolving as an operator, bulk decisions."""

from __future__ import annotations

import ast
import json
import threading
from datetime import timedelta
from pathlib import Path

import pytest
from django.db import connection, transaction

from reconciliation import services
from reconciliation.models import ClaimTake
from reconciliation.services import (
    ClaimAlreadyResolved,
    ClaimNotFound,
    ClaimNotUnresolved,
    ClaimTakenByOther,
    InvalidResolution,
    Take,
)
from runs import engine
from runs.engine import resolve_claim
from runs.models import Claim, Event, Run, Step
from runs.record import events
from runs.states import ClaimStatus, RunStatus, StepStatus
from tests.support.factories import crashed_merge, operator
from tests.support.races import Background


def db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def shift_take(claim: Claim, *, taken: str, expires: str) -> None:
    """Move a take's times (SQL intervals relative to the database's now())."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE reconciliation_claimtake SET taken_at = now() + %s::interval, "
            "expires_at = now() + %s::interval WHERE claim_id = %s",
            [taken, expires, claim.pk],
        )


# --- taking ----------------------------------------------------------------------------
def test_take_claim_records_who_until_when_on_the_database_clock(db, settings):
    settings.RECONCILIATION_TAKE_MINUTES = 30
    claim = crashed_merge()

    take = services.take_claim(claim_id=claim.id, user=operator("ann"))

    assert (take.claim_id, take.taken_by) == (claim.id, "ann")
    assert timedelta(0) <= take.taken_at - db_now() < timedelta(seconds=5)  # statement time
    assert take.expires_at == take.taken_at + timedelta(minutes=30)
    row = ClaimTake.objects.get(claim=claim)
    assert (row.taken_by.username, row.taken_at, row.expires_at) == (
        "ann",
        take.taken_at,
        take.expires_at,
    )


def test_take_claim_by_another_operator_while_live_is_refused_naming_who(db):
    claim = crashed_merge()
    ann_take = services.take_claim(claim_id=claim.id, user=operator("ann"))

    with pytest.raises(ClaimTakenByOther) as refused:
        services.take_claim(claim_id=claim.id, user=operator("bob"))

    assert (refused.value.taken_by, refused.value.taken_at, refused.value.expires_at) == (
        "ann",
        ann_take.taken_at,
        ann_take.expires_at,
    )
    assert str(refused.value) == (
        f"claim {claim.key} is taken by ann since "
        f"{ann_take.taken_at.isoformat(timespec='seconds')} "
        f"(until {ann_take.expires_at.isoformat(timespec='seconds')})"
    )
    assert ClaimTake.objects.get(claim=claim).taken_by.username == "ann"


def test_take_claim_after_expiry_goes_to_the_next_operator(db):
    claim = crashed_merge()
    services.take_claim(claim_id=claim.id, user=operator("ann"))
    shift_take(claim, taken="-2 hours", expires="-1 second")

    take = services.take_claim(claim_id=claim.id, user=operator("bob"))

    assert take.taken_by == "bob"
    assert timedelta(0) <= take.taken_at - db_now() < timedelta(seconds=5)
    row = ClaimTake.objects.get(claim=claim)
    assert (row.taken_by.username, row.taken_at) == ("bob", take.taken_at)


def test_take_claim_again_renews_ones_own_take(db, settings):
    settings.RECONCILIATION_TAKE_MINUTES = 30
    claim = crashed_merge()
    ann = operator("ann")
    services.take_claim(claim_id=claim.id, user=ann)
    shift_take(claim, taken="-25 minutes", expires="+5 minutes")

    take = services.take_claim(claim_id=claim.id, user=ann)

    now = db_now()
    # Still "since" the first take; until 30 minutes from now.
    assert take.taken_at == now - timedelta(minutes=25)
    assert timedelta(0) <= take.expires_at - (now + timedelta(minutes=30)) < timedelta(seconds=5)
    assert ClaimTake.objects.count() == 1


def test_release_claim_only_ones_own(db):
    claim = crashed_merge()
    ann, bob = operator("ann"), operator("bob")
    services.take_claim(claim_id=claim.id, user=ann)

    with pytest.raises(ClaimTakenByOther, match="is taken by ann"):
        services.release_claim(claim_id=claim.id, user=bob)
    assert services.release_claim(claim_id=claim.id, user=ann) is True
    assert services.release_claim(claim_id=claim.id, user=ann) is False  # none: a no-op
    assert not ClaimTake.objects.exists()
    services.take_claim(claim_id=claim.id, user=bob)  # free again


def test_release_claim_of_an_expired_take_by_another_is_a_no_op(db):
    claim = crashed_merge()
    services.take_claim(claim_id=claim.id, user=operator("ann"))
    shift_take(claim, taken="-2 hours", expires="-1 second")

    assert services.release_claim(claim_id=claim.id, user=operator("bob")) is False


def test_take_claim_released_when_the_claim_is_resolved(db):
    claim = crashed_merge()
    services.take_claim(claim_id=claim.id, user=operator("ann"))

    services.resolve(claim_id=claim.id, user=operator("bob"), outcome="failed", note="no merge")

    assert not ClaimTake.objects.exists()


def test_take_claim_refuses_a_claim_that_is_not_unresolved(db):
    claim = crashed_merge()
    resolve_claim(claim.id, "failed", actor="ann", note="not merged")
    claim.refresh_from_db()

    with pytest.raises(ClaimNotUnresolved) as refused:
        services.take_claim(claim_id=claim.id, user=operator("bob"))

    when = claim.resolved_at.isoformat(timespec="seconds")
    assert str(refused.value) == (
        f"claim {claim.key} is resolved as failed by ann at {when}, not unresolved: "
        "only unresolved claims can be taken"
    )
    assert not ClaimTake.objects.exists()
    with pytest.raises(ClaimNotFound):
        services.take_claim(claim_id=999999, user=operator("bob"))


@pytest.mark.django_db(transaction=True)
def test_take_claim_two_operators_at_once_exactly_one_wins():
    claim = crashed_merge()
    users = [operator("ann"), operator("bob")]
    barrier = threading.Barrier(2)
    results: dict[str, object] = {}

    def take(user) -> None:
        barrier.wait()
        try:
            results[user.username] = services.take_claim(claim_id=claim.id, user=user)
        except ClaimTakenByOther as exc:
            results[user.username] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=take, args=(user,)) for user in users]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    winners = [name for name, r in results.items() if isinstance(r, Take)]
    losers = [name for name, r in results.items() if isinstance(r, ClaimTakenByOther)]
    assert len(winners) == 1 and len(losers) == 1
    assert results[losers[0]].taken_by == winners[0]
    assert f"is taken by {winners[0]} since" in str(results[losers[0]])
    assert ClaimTake.objects.get(claim=claim).taken_by.username == winners[0]


@pytest.mark.django_db(transaction=True)
def test_take_claim_waiting_on_an_uncommitted_take_is_refused_once_it_commits():
    claim = crashed_merge()
    ann, bob = operator("ann"), operator("bob")
    with transaction.atomic():
        with connection.cursor() as cursor:  # ann's take, not yet committed
            cursor.execute(
                services.SQL["take_claim"],
                {"user": ann.pk, "seconds": 60, "claim": claim.id, "unresolved": "unresolved"},
            )
        second = Background(lambda: services.take_claim(claim_id=claim.id, user=bob))
        second.wait_blocked()  # on the claim_id key ann's insert holds
    with pytest.raises(ClaimTakenByOther, match="is taken by ann"):
        second.join()


@pytest.mark.django_db(transaction=True)
def test_take_claim_waiting_on_a_resolution_finds_the_claim_resolved():
    claim = crashed_merge()
    with transaction.atomic():
        resolve_claim(claim.id, "failed", actor="ann", note="not merged")
        taker = Background(lambda: services.take_claim(claim_id=claim.id, user=operator("bob")))
        taker.wait_blocked()  # FOR SHARE waits for the resolution's row lock
    with pytest.raises(ClaimNotUnresolved, match="resolved as failed by ann"):
        taker.join()
    assert not ClaimTake.objects.exists()


# --- resolving -------------------------------------------------------------------------
def resolve(claim: Claim, **kwargs):
    args = {"user": operator("ann"), "outcome": "succeeded", "note": "seen on host"} | kwargs
    return services.resolve(claim_id=claim.id, **args)


@pytest.mark.parametrize(
    ("kwargs", "field", "message"),
    [
        (
            {"result_json": '{"merge_id": 1,}'},
            "result",
            "result is not valid JSON: Expecting property name enclosed in double quotes "
            "at line 1, column 16",
        ),
        (
            {"result_json": "[1,\n 2"},
            "result",
            "result is not valid JSON: Expecting ',' delimiter at line 2, column 3",
        ),
        ({"result_json": "NaN"}, "result", "result is not valid JSON: NaN is not a JSON value"),
        ({"note": "   "}, "note", "a resolution needs a note saying why"),
        ({"outcome": "maybe"}, "outcome", "outcome must be 'succeeded' or 'failed', not 'maybe'"),
        (
            {"outcome": "failed", "result_json": "{}"},
            "result",
            "a failed outcome has no result (the effect did not happen)",
        ),
        ({"reference": "x" * 2001}, "reference", "reference is 2001 characters long"),
    ],
)
def test_resolve_refuses_bad_input_naming_the_field_and_changes_nothing(db, kwargs, field, message):
    claim = crashed_merge()
    events_before = Event.objects.count()

    with pytest.raises(InvalidResolution) as refused:
        resolve(claim, **kwargs)

    assert refused.value.field == field
    assert str(refused.value).startswith(message)
    claim.refresh_from_db()
    assert (claim.status, claim.resolved_at) == (ClaimStatus.UNRESOLVED, None)
    assert Event.objects.count() == events_before


def test_resolve_parses_the_result_and_keeps_the_reference_as_evidence(db):
    claim = crashed_merge()

    resolution = resolve(
        claim,
        result_json=' {"merge_id": 42} ',
        reference="  https://tickets.example/OPS-7  ",
        note="  merged as 42  ",
    )

    claim.refresh_from_db()
    assert (resolution.replayed, resolution.step_status, resolution.run_status) == (
        False,
        StepStatus.SUCCEEDED,
        RunStatus.SUCCEEDED,
    )
    assert (claim.result, claim.resolution_note, claim.resolved_by) == (
        {"merge_id": 42},
        "merged as 42",
        "ann",
    )
    assert claim.evidence == {"resolution": {"reference": "https://tickets.example/OPS-7"}}
    event = Event.objects.get(run_id=claim.run_id, type=events.CLAIM_RESOLVED)
    assert event.payload["evidence"] == {"reference": "https://tickets.example/OPS-7"}


def test_resolve_with_an_empty_result_has_no_result(db):
    claim = crashed_merge()
    resolve(claim, result_json="   ", reference="")
    claim.refresh_from_db()
    assert (claim.status, claim.result, claim.evidence) == (ClaimStatus.SUCCEEDED, None, None)


def test_resolve_double_submit_resolves_once(db):
    claim = crashed_merge()
    first = resolve(claim, outcome="failed", note="not on host")

    again = resolve(claim, outcome="failed", note=" not on host ")

    assert (first.replayed, again.replayed) == (False, True)
    assert again.claim.resolved_at == first.claim.resolved_at
    assert (again.step_status, again.run_status) == (StepStatus.QUEUED, RunStatus.RUNNING)
    assert Event.objects.filter(run_id=claim.run_id, type=events.CLAIM_RESOLVED).count() == 1
    assert Step.objects.get(pk=claim.step_id).claim_generation == 2  # retried once


def test_resolve_after_a_different_decision_is_refused_saying_who_when_what(db):
    claim = crashed_merge()
    resolve(claim, outcome="failed", note="not on host", user=operator("bob"))

    for kwargs in (
        {"outcome": "succeeded", "note": "merged"},  # someone else
        {"outcome": "failed", "note": "not on host", "user": operator("ann")},
        {"outcome": "succeeded", "note": "not on host", "user": operator("bob")},
        {"outcome": "failed", "note": "another note", "user": operator("bob")},
    ):
        with pytest.raises(ClaimAlreadyResolved, match="already resolved as failed by bob at"):
            resolve(claim, **kwargs)
    claim.refresh_from_db()
    assert (claim.status, claim.resolved_by, claim.resolution_note) == (
        ClaimStatus.FAILED,
        "bob",
        "not on host",
    )


def _race(claim: Claim, deciders: list[tuple[str, str, str]]) -> dict[str, object]:
    """Each (name, outcome, note) resolves `claim` from its own thread, all at once."""
    barrier = threading.Barrier(len(deciders))
    results: dict[str, object] = {}

    def decide(index: int, name: str, outcome: str, note: str) -> None:
        barrier.wait()
        try:
            results[f"{index}:{name}"] = services.resolve(
                claim_id=claim.id, user=operator(name), outcome=outcome, note=note
            )
        except ClaimAlreadyResolved as exc:
            results[f"{index}:{name}"] = exc
        finally:
            connection.close()

    threads = [
        threading.Thread(target=decide, args=(i, *decider)) for i, decider in enumerate(deciders)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.mark.django_db(transaction=True)
def test_resolve_concurrently_by_two_operators_exactly_one_wins():
    claim = crashed_merge()
    for name in ("ann", "bob"):
        operator(name)

    results = _race(claim, [("ann", "succeeded", "merged"), ("bob", "failed", "not merged")])

    losers = [k for k, r in results.items() if isinstance(r, ClaimAlreadyResolved)]
    winners = [k for k in results if k not in losers]
    assert len(winners) == 1 and len(losers) == 1
    winner = winners[0].split(":")[1]
    claim.refresh_from_db()
    assert claim.resolved_by == winner
    assert f"already resolved as {claim.status} by {winner} at" in str(results[losers[0]])
    assert Event.objects.filter(run_id=claim.run_id, type=events.CLAIM_RESOLVED).count() == 1


@pytest.mark.django_db(transaction=True)
def test_resolve_double_submitted_concurrently_resolves_once():
    claim = crashed_merge()
    operator("ann")

    results = _race(claim, [("ann", "failed", "not merged"), ("ann", "failed", "not merged")])

    assert sorted(r.replayed for r in results.values()) == [False, True]
    assert Event.objects.filter(run_id=claim.run_id, type=events.CLAIM_RESOLVED).count() == 1
    assert Step.objects.get(pk=claim.step_id).claim_generation == 2


# --- the set-aside rule (decisions over many claims: tests/reconciliation/test_decisions.py)
def test_contradiction_is_the_documented_rule_for_each_shape_of_evidence():
    not_applied = "runs.workflows.definition.NotApplied: host refused"
    cases = {
        # evidence: (failed, succeeded)
        '{"late_result": null, "late_attempt": 2}': ("late_result", None),
        '{"probe": {"reason": "audit log down"}}': ("probe_could_not_tell", None),
        '{"probe": {"reason": "the probe never completed: 3 tries", "tries": 3}}': (
            "probe_could_not_tell",
            None,
        ),
        f'{{"late_error": "{not_applied}", "late_attempt": 1}}': (None, "late_not_applied"),
        '{"late_error": "runs.workflows.definition.NotApplied"}': (None, "late_not_applied"),
        '{"late_error": "TimeoutError: no answer", "late_attempt": 1}': (None, None),
        '{"effect_called": false, "note": "lost its lease"}': (None, None),
        '{"reference": "OPS-1"}': (None, None),
        "null": (None, None),
    }
    for text, expected in cases.items():
        evidence = json.loads(text)
        found = tuple(
            (services.contradiction(outcome, evidence) or (None,))[0]
            for outcome in ("failed", "succeeded")
        )
        assert found == expected, text


# --- check again -----------------------------------------------------------------------
def test_reprobe_that_resolves_the_claim_releases_its_take(db):
    claim = crashed_merge(workflow="merge-change-probed")  # no merge: not applied
    Claim.objects.filter(pk=claim.pk).update(probe_after=db_now() - timedelta(seconds=1))
    ann = operator("ann")
    services.take_claim(claim_id=claim.id, user=ann)

    outcome = services.reprobe(claim_id=claim.id, user=ann)

    assert (outcome.answer, outcome.resolution.claim.status) == ("not_applied", "failed")
    assert not ClaimTake.objects.exists()
    assert Run.objects.get(pk=claim.run_id).status == RunStatus.RUNNING


def test_a_workers_probe_that_resolves_the_claim_releases_its_take(db):
    claim = crashed_merge(workflow="merge-change-probed")  # no merge: not applied
    Claim.objects.filter(pk=claim.pk).update(probe_after=db_now() - timedelta(seconds=1))
    services.take_claim(claim_id=claim.id, user=operator("ann"))

    assert engine.probe_claim(claim_id=claim.id) == "not_applied"  # the probe task's body

    assert Claim.objects.get(pk=claim.pk).resolved_by == "probe"
    assert not ClaimTake.objects.exists()


def test_a_resolution_through_the_engine_releases_the_take_in_its_transaction(db):
    claim = crashed_merge()
    services.take_claim(claim_id=claim.id, user=operator("ann"))

    with transaction.atomic():
        resolve_claim(claim.id, "failed", actor="script", note="no merge on the host")
        assert not ClaimTake.objects.exists()  # before the commit: with the resolution


def test_engine_never_imports_reconciliation():
    """The engine owns the rules; the operator side calls it, never the other way.

    The whole domain is checked (runs/ but its pages, runs/web/, which show the queue's
    counts beside the runs' as reconciliation's pages show runs)."""
    root = Path(__file__).resolve().parents[2] / "runs"
    offenders = []
    for path in sorted(p for p in root.rglob("*.py") if "web" not in p.relative_to(root).parts):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [
                f"{path.relative_to(root.parent)}:{node.lineno}"
                for name in names
                if name.split(".")[0] == "reconciliation"
            ]
    assert offenders == []
