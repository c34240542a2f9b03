"""reconciliation.queries: the queue, one claim in full, the history, the badge."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.paginator import Paginator
from django.db import connection

from reconciliation import queries, services
from reconciliation.incidents import ClaimFilter
from runs import engine
from runs.engine import resolve_claim
from runs.models import Claim, Step
from runs.record import events
from runs.states import ClaimStatus
from runs.workflows import GUARDED, Context, Workflow
from tests.support import factories
from tests.support import workflows as test_workflows
from tests.support.declared import declared
from tests.support.factories import crashed, crashed_merge, expire_leases, operator, raised


def waited(claim: Claim, interval: str) -> None:
    """The claim became unresolved `interval` ago (a SQL interval, database clock)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_claim SET unresolved_at = now() - %s::interval WHERE id = %s",
            [interval, claim.pk],
        )


def test_unresolved_queue_oldest_first_with_what_a_row_shows(db, settings):
    settings.RECONCILIATION_STALE_MINUTES = 60
    a, b, c = crashed("merge-change", 3)
    waited(a, "30 minutes")
    waited(c, "2 hours")
    resolve_claim(crashed_merge(change_id=9).id, "failed", actor="ann", note="gone")

    rows = list(queries.unresolved_queue())

    assert [r.claim_id for r in rows] == [c.id, a.id, b.id]
    oldest = rows[0]
    # Ages on the database's clock (statement time: a few milliseconds past `waited`).
    assert timedelta(hours=2) <= oldest.age < timedelta(hours=2, seconds=5)
    assert timedelta(0) <= rows[2].age < timedelta(seconds=5)
    assert [r.stale for r in rows] == [True, False, False]
    assert (oldest.key, oldest.status, oldest.run_id, oldest.run_status) == (
        c.key,
        ClaimStatus.UNRESOLVED,
        c.run_id,
        "needs_reconciliation",
    )
    assert (oldest.workflow, oldest.version, oldest.step, oldest.step_name, oldest.kind) == (
        "merge-change",
        1,
        "merge",
        "merge",
        "guarded",
    )
    assert (oldest.attempt, oldest.attempts, oldest.max_attempts) == (1, 1, 3)
    assert (oldest.cause, oldest.reason) == ("worker_died", "worker worker-2 died (lease expired)")
    assert (oldest.has_probe, oldest.evidence, oldest.late_result, oldest.take) == (
        False,
        None,
        False,
        None,
    )


def test_unresolved_queue_filters_by_workflow_and_age(db):
    merge, probed = crashed_merge(), crashed_merge(workflow="merge-change-probed")
    waited(probed, "3 hours")

    def queue(**parts: str) -> list[queries.QueueRow]:
        return list(queries.unresolved_queue(ClaimFilter(**parts).claims()))

    assert [r.claim_id for r in queue(workflow="merge-change")] == [merge.id]
    rows = queue(workflow="merge-change-probed")
    assert [(r.claim_id, r.has_probe) for r in rows] == [(probed.id, True)]
    assert [r.claim_id for r in queue(age="1h")] == [probed.id]
    assert [r.claim_id for r in queue(age="1d")] == []
    assert queries.workflows_in_queue() == ["merge-change", "merge-change-probed"]
    # The workflow a filter names stays in the list when its last claim is decided.
    assert queries.workflows_in_queue("gone") == ["gone", "merge-change", "merge-change-probed"]


# A guarded step whose postcondition rejects its result.
verified_merge = Workflow("verified-merge", version=1, input={})


@verified_merge.step(kind=GUARDED, verify=lambda result: False)
def merge_verified(ctx: Context) -> dict[str, Any]:
    return {"merged": False}


_workflows = declared(verified_merge)


def test_unresolved_queue_classifies_what_made_each_claim_unresolved(db):
    died = crashed_merge()
    raised_run = raised("fan-out")
    rejected_run = raised(verified_merge.name)

    engine.probe_claim(claim_id=Claim.objects.get(run=raised_run).id)  # cannot tell

    rows = {r.run_id: r for r in queries.unresolved_queue()}
    causes = {run_id: (r.cause, r.reason) for run_id, r in rows.items()}

    assert causes == {
        died.run_id: ("worker_died", "worker worker-0 died (lease expired)"),
        raised_run.id: ("exception", "TimeoutError: deploy API timed out"),
        rejected_run.id: (
            "postcondition",
            "verify() rejected the result of merge_verified: {'merged': False}",
        ),
    }
    assert rows[raised_run.id].probe_evidence == {"reason": "code host audit log unavailable"}
    assert (rows[died.run_id].probe_evidence, rows[died.run_id].has_probe) == (None, False)
    assert queries.classify("") == ("", "")


def test_unresolved_queue_shows_a_late_result_kept_as_evidence(db):
    run = engine.submit_run(workflow="hooked-merge", input={"mode": "return"})
    test_workflows.HOOKS[str(run.id)] = expire_leases  # paused past its lease
    engine.execute_step(step_id=Step.objects.get(run=run).id, worker="w")

    (row,) = queries.unresolved_queue()

    assert row.late_result is True
    assert row.evidence["late_result"]["change_id"] == 1


def test_unresolved_queue_shows_a_live_take_only(db):
    taken, expired, free = crashed("merge-change", 3)
    ann, bob = operator("ann"), operator("bob")
    take = services.take_claim(claim_id=taken.id, user=ann)
    services.take_claim(claim_id=expired.id, user=bob)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE reconciliation_claimtake SET taken_at = now() - interval '2 hours', "
            "expires_at = now() - interval '1 second' WHERE claim_id = %s",
            [expired.id],
        )

    takes = {r.claim_id: r.take for r in queries.unresolved_queue()}

    assert takes == {taken.id: take, expired.id: None, free.id: None}
    assert (take.taken_by, take.taken_by_id) == ("ann", ann.pk)


def test_unresolved_queue_page_of_200_takes_a_constant_number_of_queries(
    db, django_assert_max_num_queries
):
    claims = crashed("merge-change", 200)
    crashed_merge(workflow="merge-change-probed")
    for claim in claims[:50]:
        services.take_claim(claim_id=claim.id, user=operator("ann"))

    with django_assert_max_num_queries(2):  # COUNT, and one SELECT for the page
        page = Paginator(queries.unresolved_queue(), 200).page(1)
        rows = [(r.claim_id, r.cause, r.has_probe, r.take, r.stale, r.age) for r in page]

    assert len(rows) == 200 and page.paginator.count == 201
    assert sum(1 for r in rows if r[3] is not None) == 50
    with django_assert_max_num_queries(2):
        assert len(list(Paginator(queries.unresolved_queue(), 200).page(2))) == 1


def test_queue_size_and_oldest_age(db, settings):
    settings.RECONCILIATION_STALE_MINUTES = 60
    assert (queries.queue_size(), queries.oldest_unresolved_age()) == (0, None)
    a, b = crashed("merge-change", 2)
    waited(a, "90 minutes")
    resolve_claim(b.id, "failed", actor="ann", note="no")
    crashed_merge(change_id=5)

    assert queries.queue_size() == 2
    assert queries.oldest_unresolved_age() == timedelta(minutes=90)  # now(): the same clock
    assert queries.queue_summary() == queries.QueueSummary(2, timedelta(minutes=90), 1)


@pytest.mark.django_db(transaction=True)
def test_claim_detail_has_everything_to_decide(django_assert_max_num_queries):
    claim = crashed_merge(change_id=7, workflow="merge-change-probed")
    take = services.take_claim(claim_id=claim.id, user=operator("ann"))

    # BEGIN … COMMIT of one read-only snapshot, and the run's search keys (its workflow
    # declares change_id)
    with django_assert_max_num_queries(11):
        detail = queries.claim_detail(claim.id)

    assert detail.run_input == {"change_id": 7}
    assert detail.search_keys == [("change_id", "7")]
    assert (detail.row.claim_id, detail.row.take, detail.row.has_probe) == (claim.id, take, True)
    assert detail.probe_due is False  # lease + grace not over yet
    assert [(a.number, a.worker, a.status, a.error) for a in detail.attempts] == [
        (1, "worker-0", "crashed", "lease expired")
    ]
    assert [e.type for e in detail.events] == [
        events.STEP_QUEUED,
        events.RUN_STARTED,
        events.STEP_STARTED,
        events.CLAIM_TAKEN,
        events.ATTEMPT_CRASHED,
        events.CLAIM_UNRESOLVED,
        events.STEP_UNRESOLVED,
        events.RUN_NEEDS_RECONCILIATION,
        events.PROBE_REQUESTED,
    ]
    assert (detail.events_truncated, detail.late_results) == (False, [])
    assert detail.events[3].payload == {"key": claim.key, "retaken": False}
    assert (detail.previews["succeeded"].action, detail.previews["failed"].action) == (
        "finishes_run",
        "retries",
    )
    assert queries.claim_detail(999999) is None


def test_claim_detail_of_a_resolved_claim_shows_a_late_result(db):
    run = factories.late_result_after_resolution()
    first = Claim.objects.filter(run=run).order_by("id").first()

    detail = queries.claim_detail(first.id)

    assert (detail.claim.status, detail.claim.resolved_by, detail.row.take) == (
        "failed",
        "ann",
        None,
    )
    assert [e.payload["resolved_as"] for e in detail.late_results] == ["failed"]
    assert detail.previews["succeeded"].action == "not_unresolved"


@pytest.mark.django_db(transaction=True)
def test_resolution_history_newest_first_with_filters_and_the_late_result_flag():
    ann, bob = operator("ann"), operator("bob")
    first, second = crashed("merge-change", 2)
    probed = crashed_merge(workflow="merge-change-probed")
    crashed_merge(change_id=4)  # still unresolved: not history
    services.resolve(claim_id=first.id, user=ann, outcome="succeeded", note="merged")
    services.resolve(claim_id=second.id, user=bob, outcome="failed", note="not merged")
    services.resolve(claim_id=probed.id, user=ann, outcome="failed", note="no merge")
    late_run = engine.submit_run(workflow="hooked-merge", input={"mode": "return"})

    def operator_decided_meanwhile() -> None:
        expire_leases()
        engine.sweep()
        services.resolve(
            claim_id=Claim.objects.get(run=late_run).id, user=bob, outcome="failed", note="gone"
        )

    test_workflows.HOOKS[str(late_run.id)] = operator_decided_meanwhile
    engine.execute_step(step_id=Step.objects.get(run=late_run).id, worker="w")
    late = Claim.objects.filter(run=late_run).order_by("id").first()

    def ids(**filters):
        return [r.claim_id for r in queries.resolution_history(**filters)]

    assert ids() == [late.id, probed.id, second.id, first.id]
    assert ids(operator="ann") == [probed.id, first.id]
    assert ids(outcome="succeeded") == [first.id]
    assert ids(workflow="merge-change-probed") == [probed.id]
    second_at = Claim.objects.get(pk=second.id).resolved_at
    assert ids(since=second_at) == [late.id, probed.id, second.id]
    assert ids(until=second_at) == [first.id]
    rows = {r.claim_id: r for r in queries.resolution_history()}
    assert [rows[i].late_result_after_resolution for i in ids()] == [True, False, False, False]
    row = rows[first.id]
    assert (row.outcome, row.resolved_by, row.note, row.workflow, row.step, row.evidence) == (
        "succeeded",
        "ann",
        "merged",
        "merge-change",
        "merge",
        None,
    )
    assert queries.history_operators() == ["ann", "bob"]
