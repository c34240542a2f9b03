"""Incidents and "decide all N matching" (reconciliation/incidents.py, decisions.py):
claims grouped by workflow · step · cause, and a decision over a filter made a batch of
the runs' batch machinery, each claim decided once, in its own transaction, with the
set-aside rule checked again under the claim's lock."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.http import QueryDict

from reconciliation import decisions, services
from reconciliation.incidents import WORKER_DIED, ClaimFilter, incident_groups
from reconciliation.models import ClaimTake
from runs.batches import service as batches
from runs.errors import InvalidResolution
from runs.models import Batch, BatchItem, Claim, Event
from runs.record import events
from runs.states import BatchItemStatus, BatchStatus, ClaimStatus
from tests.support import factories
from tests.support.factories import crashed, crashed_merge, operator


def errors(claims: list[Claim], *texts: str) -> None:
    """Give the claims these errors, in turn (as attempts that raised would leave)."""
    for claim, text in zip(claims, texts, strict=True):
        Claim.objects.filter(pk=claim.pk).update(error=text)


def decide(claim_filter: ClaimFilter, outcome: str, note: str, user) -> Batch:
    """Preview, confirm and process a decision in this process, as a worker would."""
    preview = decisions.preview(claim_filter=claim_filter, outcome=outcome, user=user)
    batch = decisions.start(
        claim_filter=claim_filter, outcome=outcome, note=note, as_of=preview.as_of, user=user
    )
    while batches.process(batch.id).more:
        pass
    batch.refresh_from_db()
    return batch


# --- incident groups -----------------------------------------------------------------
def test_groups_are_workflow_step_and_cause_with_what_varies_taken_out(db):
    timeouts = crashed("merge-change", 3)
    errors(
        timeouts,
        "TimeoutError: code host timed out after 30 s",
        "TimeoutError: code host timed out after 31 s",
        "TimeoutError: code host timed out after 930 s",
    )
    refused = crashed("merge-change", 1)
    errors(refused, "ValueError: change 1f0e6c2a-7b7e-4c5e-9a55-0a6a4b1c2d3e is closed")
    died = crashed("merge-change-probed", 2)  # the factory's: "worker worker-N died …"

    groups = incident_groups()

    assert [(g.workflow, g.step, g.cause, g.count) for g in groups] == [
        ("merge-change", "merge", "TimeoutError: code host timed out after # s", 3),
        ("merge-change-probed", "merge", WORKER_DIED, 2),
        ("merge-change", "merge", "ValueError: change … is closed", 1),
    ]
    assert (groups[0].error_class, groups[0].message) == (
        "TimeoutError",
        "code host timed out after # s",
    )
    assert (groups[1].error_class, groups[1].message) == ("", WORKER_DIED)
    oldest = Claim.objects.get(pk=timeouts[0].pk).unresolved_at
    assert groups[0].oldest == oldest
    assert [g.with_evidence for g in groups] == [0, 0, 0]
    # Each group's filter selects exactly its claims: the queue, the group and a
    # decision over it agree.
    for group in groups:
        assert group.filter.claims().count() == group.count
    assert {c.pk for c in groups[1].filter.claims()} == {c.pk for c in died}


def test_a_group_counts_claims_taken_and_claims_with_evidence(db):
    ann = operator("ann")
    kept = factories.late_answer_kept("return")
    other = factories.late_answer_kept("raise")
    services.take_claim(claim_id=other.id, user=ann)

    (group,) = [g for g in incident_groups() if g.workflow == "hooked-merge"]

    assert (group.count, group.with_evidence, group.taken) == (2, 2, 1)
    assert kept.pk in {c.pk for c in group.filter.claims()}


def test_the_filter_reports_a_bad_part_and_leaves_it_out(db):
    found: dict[str, str] = {}
    parsed = ClaimFilter.parse(QueryDict("workflow=merge-change&age=3y&cause=a%00b"), found)

    assert parsed == ClaimFilter(workflow="merge-change")
    assert set(found) == {"age", "cause"}
    assert found["age"] == "unknown age '3y': choose one of the list"
    assert parsed.query(page="2") == "workflow=merge-change&page=2"
    assert ClaimFilter(workflow="w", step="s", cause="E: x", age="1h").words() == (
        "w · s · E: x, waiting at least 1 hour"
    )


# --- the preview ---------------------------------------------------------------------
def test_a_preview_counts_identical_consequences_on_one_line_and_writes_nothing(db):
    claims = crashed("merge-change", 3)
    events_before = Event.objects.count()

    preview = decisions.preview(
        claim_filter=ClaimFilter(workflow="merge-change"), outcome="failed", user=operator()
    )

    assert (preview.matched, preview.decidable, preview.previewed) == (3, 3, 3)
    assert [(c.said, c.count) for c in preview.consequences] == [
        ("step merge retried: attempt 2 of 3; the run resumes", 3)
    ]
    assert preview.set_aside == ()
    assert Event.objects.count() == events_before
    assert Batch.objects.count() == 0
    assert Claim.objects.filter(pk__in=[c.pk for c in claims], status="unresolved").count() == 3


@pytest.mark.parametrize(
    ("outcome", "note", "field", "message"),
    [
        ("", "checked", "outcome", "choose what happened to the effects: succeeded or failed"),
        ("maybe", "checked", "outcome", None),
        ("failed", "  ", "note", "a resolution needs a note saying why"),
    ],
)
def test_a_decision_without_an_outcome_or_a_note_is_refused_and_writes_nothing(
    db, outcome, note, field, message
):
    crashed("merge-change", 2)
    claim_filter = ClaimFilter(workflow="merge-change")
    with pytest.raises(InvalidResolution) as refused:
        decisions.start(
            claim_filter=claim_filter,
            outcome=outcome,
            note=note,
            as_of=decisions._now(),
            user=operator(),
        )
    assert refused.value.field == field
    if message:
        assert str(refused.value) == message
    assert (Batch.objects.count(), BatchItem.objects.count()) == (0, 0)
    assert Claim.objects.filter(status=ClaimStatus.UNRESOLVED).count() == 2


def test_a_decision_over_more_claims_than_one_takes_is_refused(db, monkeypatch):
    crashed("merge-change", 3)
    monkeypatch.setattr(decisions, "MAX_CLAIMS", 2)
    with pytest.raises(InvalidResolution, match="matches more than 2 claims") as refused:
        decisions.start(
            claim_filter=ClaimFilter(),
            outcome="failed",
            note="x",
            as_of=decisions._now(),
            user=operator(),
        )
    assert refused.value.field == "filter"
    assert Batch.objects.count() == 0


# --- confirming and applying ---------------------------------------------------------
def test_a_decision_resolves_every_matching_claim_once_and_records_its_filter(db):
    claims = crashed("merge-change", 3)
    other = crashed("merge-change-probed", 1)
    ann = operator("ann")

    batch = decide(ClaimFilter(workflow="merge-change"), "failed", "host was down", ann)

    assert (batch.operation, batch.outcome, batch.filter, batch.reason, batch.created_by) == (
        "resolve",
        "failed",
        "workflow=merge-change",
        "host was down",
        "ann",
    )
    assert (batch.status, batch.total, batch.done, batch.applied, batch.set_aside) == (
        BatchStatus.SUCCEEDED,
        3,
        3,
        3,
        0,
    )
    ids = [c.pk for c in claims]
    assert list(
        BatchItem.objects.filter(batch=batch).order_by("id").values_list("claim_id", "status")
    ) == [(i, BatchItemStatus.APPLIED) for i in ids]
    resolved = Claim.objects.filter(pk__in=ids).order_by("id")
    assert [(c.status, c.resolved_by, c.resolution_note) for c in resolved] == [
        (ClaimStatus.FAILED, "ann", "host was down")
    ] * 3
    assert [c.evidence["resolution"] for c in resolved] == [{"batch": batch.id}] * 3
    assert Event.objects.filter(type=events.CLAIM_RESOLVED).count() == 3
    assert Claim.objects.get(pk=other[0].pk).status == ClaimStatus.UNRESOLVED
    # Processed again (a duplicate message): nothing is decided twice.
    assert batches.process(batch.id).processed == 0
    assert Event.objects.filter(type=events.CLAIM_RESOLVED).count() == 3


def test_confirming_freezes_only_the_claims_unresolved_by_the_preview(db):
    first = crashed("merge-change", 2)
    ann = operator("ann")
    claim_filter = ClaimFilter(workflow="merge-change")
    preview = decisions.preview(claim_filter=claim_filter, outcome="failed", user=ann)
    later = crashed("merge-change", 1)  # unresolved after the preview was read
    Claim.objects.filter(pk=later[0].pk).update(unresolved_at=preview.as_of + timedelta(seconds=1))

    batch = decisions.start(
        claim_filter=claim_filter, outcome="failed", note="x", as_of=preview.as_of, user=ann
    )

    frozen = set(BatchItem.objects.filter(batch=batch).values_list("claim_id", flat=True))
    assert frozen == {c.pk for c in first}


def test_a_colleagues_decisions_are_said_once_not_claim_by_claim(db):
    claims = crashed("merge-change", 3)
    ann, bob = operator("ann"), operator("bob")
    claim_filter = ClaimFilter(workflow="merge-change")
    preview = decisions.preview(claim_filter=claim_filter, outcome="failed", user=ann)
    batch = decisions.start(
        claim_filter=claim_filter, outcome="failed", note="x", as_of=preview.as_of, user=ann
    )
    for claim in claims[:2]:  # bob decides two the same way before the batch reaches them
        services.resolve(claim_id=claim.pk, user=bob, outcome="failed", note="checked")

    while batches.process(batch.id).more:
        pass

    batch.refresh_from_db()
    assert (batch.applied, batch.refused) == (1, 2)
    messages = set(
        BatchItem.objects.filter(batch=batch, status="refused").values_list("message", flat=True)
    )
    assert messages == {"already resolved as failed by bob; the same outcome"}
    assert Claim.objects.filter(resolved_by="bob").count() == 2


def test_did_not_happen_sets_aside_contradicting_evidence_and_others_takes(db):
    ann, bob = operator("ann"), operator("bob")
    returned = factories.late_answer_kept("return")  # a late result: the merge happened
    taken = factories.late_answer_kept("raise")  # says nothing either way, but bob has it
    services.take_claim(claim_id=taken.id, user=bob)
    mine = factories.late_answer_kept("raise")
    services.take_claim(claim_id=mine.id, user=ann)  # one's own take is no obstacle
    agrees = factories.late_answer_kept("not_applied")  # agrees: it did not happen
    claim_filter = ClaimFilter(workflow="hooked-merge")

    preview = decisions.preview(claim_filter=claim_filter, outcome="failed", user=ann)
    batch = decide(claim_filter, "failed", "checked", ann)

    assert [(a.claim_id, a.reason) for a in preview.set_aside] == [
        (returned.id, "late_result"),
        (taken.id, "taken"),
    ]
    assert preview.set_aside[0].message.startswith(
        "a late result says the effect happened: attempt 1 returned"
    )
    assert re.fullmatch(
        r"bob is on it \(until \S+\): theirs to decide, or yours once it ends",
        preview.set_aside[1].message,
    )
    assert (preview.matched, preview.decidable) == (4, 2)
    assert (batch.applied, batch.set_aside, batch.refused, batch.failed) == (2, 2, 0, 0)
    statuses = dict(Claim.objects.values_list("id", "status"))
    assert [statuses[c.id] for c in (returned, taken, mine, agrees)] == [
        "unresolved",
        "unresolved",
        "failed",
        "failed",
    ]
    items = dict(BatchItem.objects.filter(batch=batch).values_list("claim_id", "status"))
    assert (items[returned.id], items[taken.id]) == ("set_aside", "set_aside")
    assert list(ClaimTake.objects.values_list("claim_id", "taken_by__username")) == [
        (taken.id, "bob")
    ]


def test_it_happened_sets_aside_a_late_not_applied_only(db):
    ann = operator("ann")
    refused = factories.late_answer_kept("not_applied")
    factories.late_answer_kept("return")
    factories.late_answer_kept("raise")

    batch = decide(ClaimFilter(workflow="hooked-merge"), "succeeded", "done", ann)

    item = BatchItem.objects.get(batch=batch, status="set_aside")
    assert item.claim_id == refused.id
    assert item.message.startswith("a late answer says the effect did not happen: attempt 1")
    assert (batch.applied, batch.set_aside) == (2, 1)


def test_evidence_that_arrives_after_the_preview_sets_the_claim_aside(db):
    """The rule is checked under the claim's lock when the batch reaches the claim: a
    preview read earlier cannot carry a contradicted claim through."""
    ann = operator("ann")
    claim = crashed_merge(change_id=9)
    claim_filter = ClaimFilter(workflow="merge-change")
    preview = decisions.preview(claim_filter=claim_filter, outcome="failed", user=ann)
    assert preview.set_aside == ()
    batch = decisions.start(
        claim_filter=claim_filter, outcome="failed", note="x", as_of=preview.as_of, user=ann
    )
    Claim.objects.filter(pk=claim.pk).update(
        evidence={"late_result": {"merge_id": 1}, "late_attempt": 1}
    )  # what settle_late_finish keeps, arrived since

    batches.process(batch.id)

    assert BatchItem.objects.get(batch=batch).status == BatchItemStatus.SET_ASIDE
    assert Claim.objects.get(pk=claim.pk).status == ClaimStatus.UNRESOLVED


def test_nothing_left_to_decide_is_refused(db):
    (claim,) = crashed("merge-change", 1)
    ann = operator("ann")
    as_of = decisions._now()
    services.resolve(claim_id=claim.pk, user=ann, outcome="failed", note="x")
    with pytest.raises(InvalidResolution, match="nothing to decide") as refused:
        decisions.start(
            claim_filter=ClaimFilter(workflow="merge-change"),
            outcome="failed",
            note="x",
            as_of=as_of,
            user=ann,
        )
    assert refused.value.field == "filter"
