"""A decision over 600 unresolved claims (docs/operating.md#decide-all-matching) whose
worker is SIGKILLed partway, then resumed by a new worker, decides each claim exactly
once: one claim_resolved event per claim, every item applied, the counts exact, and the
two claims the rule sets aside left unresolved."""

from __future__ import annotations

import signal

import pytest
from django.db.models import Count

from config.celery import app
from reconciliation import decisions, services
from reconciliation.incidents import ClaimFilter
from runs.models import Batch, BatchItem, Claim, Event
from runs.record import events
from runs.states import BatchItemStatus, BatchStatus, ClaimStatus
from tests.support import factories
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.workers, pytest.mark.soak, pytest.mark.timeout(900)]

CLAIMS = 600


def test_a_decision_killed_halfway_and_resumed_decides_each_claim_exactly_once(cluster):
    *claims, late, taken = factories.crashed("merge-change", CLAIMS + 2)
    Claim.objects.filter(pk=late.pk).update(
        evidence={"late_result": {"merge_id": 1}, "late_attempt": 1}
    )
    ann, bob = factories.operator("ann"), factories.operator("bob")
    services.take_claim(claim_id=taken.pk, user=bob)
    app.control.purge()  # the factories' step messages: their attempts are long dead
    claim_filter = ClaimFilter(workflow="merge-change")
    preview = decisions.preview(claim_filter=claim_filter, outcome="failed", user=ann)
    assert (preview.matched, preview.decidable) == (CLAIMS + 2, CLAIMS)

    batch = decisions.start(
        claim_filter=claim_filter,
        outcome="failed",
        note="the code host was down",
        as_of=preview.as_of,
        user=ann,
    )
    doomed = cluster.worker()
    cluster.beat()

    def done() -> int:
        return Batch.objects.get(pk=batch.id).done

    wait_for(lambda: done() >= 250, timeout=600, what="250 items done", on_timeout=cluster.logs)
    doomed.signal(signal.SIGKILL)
    assert doomed.wait_exit() == -signal.SIGKILL
    at_kill = done()
    assert 250 <= at_kill < CLAIMS + 2, at_kill

    cluster.worker()  # its start resumes the batch
    wait_for(
        lambda: Batch.objects.get(pk=batch.id).status != BatchStatus.RUNNING,
        timeout=600,
        what="the decision to finish",
        on_timeout=cluster.logs,
    )

    batch.refresh_from_db()
    assert (batch.status, batch.total, batch.done) == (
        BatchStatus.SUCCEEDED,
        CLAIMS + 2,
        CLAIMS + 2,
    )
    assert (batch.applied, batch.set_aside, batch.refused, batch.failed) == (CLAIMS, 2, 0, 0)
    items = BatchItem.objects.filter(batch=batch)
    assert items.values("claim").distinct().count() == CLAIMS + 2
    statuses = dict(items.values_list("claim_id", "status"))
    assert {statuses[c.pk] for c in claims} == {BatchItemStatus.APPLIED}
    assert (statuses[late.pk], statuses[taken.pk]) == ("set_aside", "set_aside")
    # Exactly one resolution per claim, by ann, naming the batch.
    ids = [c.pk for c in claims]
    assert set(
        Claim.objects.filter(pk__in=ids).values_list(
            "status", "resolved_by", "evidence__resolution__batch"
        )
    ) == {(ClaimStatus.FAILED, "ann", batch.id)}
    resolved = Event.objects.filter(type=events.CLAIM_RESOLVED, payload__actor="ann")
    per_claim = resolved.values("payload__key").annotate(n=Count("id"))
    assert len(per_claim) == CLAIMS and {row["n"] for row in per_claim} == {1}
    assert Claim.objects.get(pk=late.pk).status == ClaimStatus.UNRESOLVED
    assert Claim.objects.get(pk=taken.pk).status == ClaimStatus.UNRESOLVED
