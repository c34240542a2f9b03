"""A map item's fence (runs/engine/attempts/items.py, _fence_item): a share lock while the
lease is fresh, a renewal once a quarter of it is spent by the worker's clock, and in
both cases a refusal once the database's clock says the lease is gone."""

from __future__ import annotations

import time

import pytest
from django.db import transaction

from examples.models import TargetRecord
from runs import engine
from runs.engine.tools import fence_item, start_attempt
from runs.errors import AttemptFenced
from runs.models import Attempt, Claim, Step
from runs.states import ClaimStatus
from tests.support.factories import expire_leases

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def started_batch():
    run = engine.submit_run(workflow="migrate-records", input={"count": 4, "batch_size": 4})
    engine.execute_step(step_id=Step.objects.get(run=run, key="list_records").id, worker="t")
    started = start_attempt(step_id=Step.objects.get(run=run, key="migrate[0]").id, worker="t")
    assert started is not None
    return started


def lease_of(started) -> object:
    return Attempt.objects.values_list("lease_expires_at", flat=True).get(pk=started.attempt.id)


def test_a_fresh_lease_is_held_not_rewritten(started_batch):
    before = lease_of(started_batch)
    with transaction.atomic():
        fence_item(started_batch, claim_id=0, result=None)
    assert lease_of(started_batch) == before


def test_a_quarter_spent_lease_is_renewed_by_the_fence(started_batch):
    before = lease_of(started_batch)
    started_batch.lease.renewed(time.monotonic() - started_batch.lease_seconds / 4)
    with transaction.atomic():
        fence_item(started_batch, claim_id=0, result=None)
    assert lease_of(started_batch) > before
    assert time.monotonic() - started_batch.lease.set_at < 5  # counted from the renewal


@pytest.mark.parametrize("spent", [0.0, 0.5], ids=["held", "renewing"])
def test_an_expired_lease_refuses_the_item_whatever_the_worker_clock_says(started_batch, spent):
    expire_leases()
    started_batch.lease.renewed(time.monotonic() - started_batch.lease_seconds * spent)
    with pytest.raises(AttemptFenced), transaction.atomic():
        fence_item(started_batch, claim_id=0, result=None)


# --- the fence at the item's commit (migration 0019's deferred constraint trigger) ----
def run_item(started, index: int = 0) -> bool:
    from runs.engine.tools import context_factory, keys, transactional_item

    pair = started.step.items[index]
    key = keys.item_key(started.run.id, started.step.name, started.parent_revision, pair["key"])
    ctx = context_factory(started)(item=pair["item"], item_key=pair["key"], key=key)
    return transactional_item(started, ctx, key, pair["key"], pair["item"])


def test_a_live_item_commits_with_its_claim_and_no_fence_statement(started_batch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        assert run_item(started_batch) is True
    assert not any("runs_attempt" in (q["sql"] or "") for q in queries.captured_queries)
    assert TargetRecord.objects.filter(run_id=started_batch.run.id).count() == 1
    assert Claim.objects.get(step=started_batch.step).status == ClaimStatus.SUCCEEDED


def test_an_item_whose_lease_ended_is_refused_at_its_commit(started_batch):
    expire_leases()  # the worker's clock says the lease is fresh: no fence statement
    with pytest.raises(AttemptFenced):
        run_item(started_batch)
    assert TargetRecord.objects.filter(run_id=started_batch.run.id).count() == 0
    assert not Claim.objects.filter(step=started_batch.step).exists()


def test_an_item_inside_a_callers_transaction_is_fenced_there(started_batch):
    expire_leases()
    with pytest.raises(AttemptFenced), transaction.atomic():
        run_item(started_batch)
    assert TargetRecord.objects.filter(run_id=started_batch.run.id).count() == 0


# --- a first attempt's claims: no ON CONFLICT (claims.sql, insert_bounded_new) -------
def test_a_first_attempts_item_claims_without_on_conflict(started_batch):
    from django.db import connection

    sent: list[str] = []

    def record(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        assert run_item(started_batch) is True
    claims = [sql for sql in sent if "INTO runs_claim" in sql]
    assert len(claims) == 1 and "ON CONFLICT" not in claims[0]
    assert TargetRecord.objects.filter(run_id=started_batch.run.id).count() == 1
    claim = Claim.objects.get(step=started_batch.step)
    assert (claim.status, claim.attempt_id) == (ClaimStatus.SUCCEEDED, started_batch.attempt.id)
    assert claim.completed_at is not None


def test_a_zombie_first_attempt_skips_the_item_its_retry_took(started_batch):
    """Attempt 1 lost its lease; attempt 2 took item 0. The zombie's insert meets the
    unique key: the item is skipped, as ON CONFLICT answered, and not applied twice;
    its next item is refused at the commit by the fence."""
    expire_leases()
    engine.sweep()
    retry = start_attempt(step_id=started_batch.step.id, worker="t2")
    assert retry is not None and retry.attempt.number == 2
    assert run_item(retry, 0) is True

    assert run_item(started_batch, 0) is False
    with pytest.raises(AttemptFenced):
        run_item(started_batch, 1)
    assert TargetRecord.objects.filter(run_id=started_batch.run.id).count() == 1
    assert list(
        Claim.objects.filter(step=started_batch.step).values_list("attempt", flat=True)
    ) == [retry.attempt.id]
