"""Idempotent and guarded examples against real workers."""

from __future__ import annotations

import signal

import pytest

from examples.models import Merge, PaymentCharge, PaymentRequest
from runs import engine
from runs.models import Attempt, Claim
from runs.states import AttemptStatus, ClaimStatus, RunStatus

from .helpers import wait_settled

pytestmark = [pytest.mark.workers, pytest.mark.broker]


def test_charge_payment_killed_after_effect_retries_with_same_key_and_charges_once(cluster):
    doomed = cluster.worker(faults="after_effect:charge")
    cluster.beat()
    run = engine.submit_run(workflow="charge-payment", input={"amount": 1250})
    assert doomed.wait_exit() == -signal.SIGKILL
    # The charge happened, but its completion was never recorded.
    assert PaymentCharge.objects.count() == 1
    assert Claim.objects.get(run=run).status == ClaimStatus.IN_FLIGHT

    cluster.worker()
    run = wait_settled(run, cluster)

    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    claim = Claim.objects.get(run=run)
    assert claim.status == ClaimStatus.SUCCEEDED
    # Two requests reached the API, both with the claim's key; one charge was made.
    assert list(PaymentRequest.objects.values_list("idempotency_key", flat=True)) == [claim.key] * 2
    charge = PaymentCharge.objects.get()
    assert (charge.idempotency_key, charge.amount) == (claim.key, 1250)
    assert claim.result["replayed"] is True
    assert Attempt.objects.filter(run=run, status=AttemptStatus.CRASHED).count() == 1


def test_merge_change_merges_once(cluster):
    cluster.worker()
    run = engine.submit_run(workflow="merge-change", input={"change_id": 42})

    run = wait_settled(run, cluster)

    assert run.status == RunStatus.SUCCEEDED, cluster.logs()
    assert list(Merge.objects.values_list("change_id", "run_id")) == [(42, run.id)]
    claim = Claim.objects.get(run=run)
    assert claim.status == ClaimStatus.SUCCEEDED
    assert claim.result == {"merge_id": Merge.objects.get().id, "change_id": 42}
