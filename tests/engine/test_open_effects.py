"""Effects never repeat and compensations are never lost when a person acts mid-effect:
a retry after an abandoned idempotent claim keeps its key however many claims failed
before it, and a run stopped (cancelled, or compensating) while a compensable
idempotent step runs or waits for its retry leaves that effect converged, compensated
or decided by a person, never failed with its outcome unknown."""

from __future__ import annotations

import pytest
from celery.signals import before_task_publish

from examples.fakes import PaymentAPI
from examples.models import PaymentCharge
from runs import engine
from runs.engine.tools import fail_attempt, finish_with_result, start_attempt
from runs.models import Claim, Event, Run, Step
from runs.record import events
from runs.states import ClaimStatus, RunStatus, StepStatus
from tests.support import workflows
from tests.support.factories import drain, due_now, expire_leases


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def claims(run: Run, step: str) -> list[tuple[str, str]]:
    return list(
        Claim.objects.filter(run=run, step__name=step, item_key__isnull=True)
        .order_by("id")
        .values_list("key", "status")
    )


# --- 1. the key of a retry after an abandoned claim --------------------------------------
def _charge_declined_for_good(run: Run) -> str:
    """Every attempt of `charge` is declined (NotApplied): its newest claim fails, and
    the run too. Returns that claim's key."""
    step = step_of(run, "charge")
    while step.status != StepStatus.FAILED:
        started = start_attempt(step_id=step.id, worker="w")
        assert started is not None
        fail_attempt(started, error="NotApplied: the card was declined", uncertain=False)
        due_now()
        step.refresh_from_db()
    key, status = claims(run, "charge")[-1]
    assert status == ClaimStatus.FAILED
    assert Run.objects.get(pk=run.id).status == RunStatus.FAILED
    return key


def _charged_and_answer_lost(run: Run, *, how: str) -> None:
    """Every attempt charges, and its answer never arrives: the call raises after the
    effect (`raise`), or the worker dies (`crash`). No attempt is left at the end: the
    claim is abandoned and the run fails."""
    step = step_of(run, "charge")
    while step.status != StepStatus.FAILED:
        started = start_attempt(step_id=step.id, worker="w")
        assert started is not None and started.claim is not None
        PaymentAPI().charge(amount=5, idempotency_key=started.claim.key)
        if how == "raise":
            fail_attempt(started, error="TimeoutError: no answer", uncertain=True)
        else:
            expire_leases()
            engine.sweep()
        due_now()
        step.refresh_from_db()


@pytest.mark.parametrize("how", ["raise", "crash"])
def test_a_retry_after_an_abandoned_claim_keeps_its_key_though_an_older_claim_failed(db, how):
    """Failed for good with NotApplied (claim K failed) → retried (K/retry-2, right) →
    charged under K/retry-2 with every answer lost (abandoned) → retried again: the
    preview promises K/retry-2 and the retry uses it. It failed before the fix: the
    second retry took K/retry-3, and the provider charged twice."""
    run = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    first = _charge_declined_for_good(run)
    engine.retry_steps(run_id=run.id, step_keys=["charge"], actor="ann")
    _charged_and_answer_lost(run, how=how)
    second = f"{first}/retry-2"
    assert claims(run, "charge") == [(first, ClaimStatus.FAILED), (second, ClaimStatus.ABANDONED)]
    assert Run.objects.get(pk=run.id).status == RunStatus.FAILED

    plan = engine.preview_retry(run_id=run.id, step_keys=["charge"])
    assert plan.steps == (
        ("charge", "idempotent", f"the same key {second} (the external system dedupes it)"),
    )
    engine.retry_run(run_id=run.id, actor="bob")  # a bulk retry's way in
    run = drain(run)

    assert run.status == RunStatus.SUCCEEDED
    assert claims(run, "charge") == [(first, ClaimStatus.FAILED), (second, ClaimStatus.SUCCEEDED)]
    assert PaymentCharge.objects.filter(idempotency_key__startswith=f"{run.id}/").count() == 1


def test_a_retry_after_a_failed_latest_claim_still_takes_a_new_key(db):
    """The other side of the rule: the newest claim failed (its effect did not happen),
    so the retry moves on to the next key, and the preview says so."""
    run = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    first = _charge_declined_for_good(run)
    engine.retry_steps(run_id=run.id, step_keys=["charge"], actor="ann")
    assert _charge_declined_for_good(run) == f"{first}/retry-2"
    plan = engine.preview_retry(run_id=run.id, step_keys=["charge"])
    assert plan.steps == (
        ("charge", "idempotent", "a new key …/retry-3 (the earlier effect did not happen)"),
    )
    engine.retry_steps(run_id=run.id, step_keys=["charge"], actor="ann")
    run = drain(run)
    assert run.status == RunStatus.SUCCEEDED
    assert claims(run, "charge") == [
        (first, ClaimStatus.FAILED),
        (f"{first}/retry-2", ClaimStatus.FAILED),
        (f"{first}/retry-3", ClaimStatus.SUCCEEDED),
    ]


# --- 2. a run stopped while a compensable idempotent effect is open ----------------------
@pytest.fixture
def refunds():
    workflows.REFUNDS.clear()
    yield workflows.REFUNDS
    workflows.REFUNDS.clear()


def _charging(*, seat_held: bool) -> tuple[Run, object]:
    """`refundable-charge` with `charge_card` running (its claim in flight, its charge
    made), and `hold_seat` succeeded (so a cancel compensates) or still queued."""
    run = engine.submit_run(workflow="refundable-charge", input={})
    if seat_held:
        engine.execute_step(step_id=step_of(run, "hold_seat").id, worker="w")
    started = start_attempt(step_id=step_of(run, "charge_card").id, worker="w")
    assert started is not None and started.claim is not None
    PaymentAPI().charge(amount=5, idempotency_key=started.claim.key)
    return run, started


def _decide_charge(run: Run, outcome: str) -> None:
    claim = Claim.objects.get(run=run, step__name="charge_card", status=ClaimStatus.UNRESOLVED)
    charge = PaymentCharge.objects.get(idempotency_key=claim.key)
    engine.resolve_claim(
        claim.id,
        outcome,
        actor="ops",
        note="the provider's dashboard shows the charge"
        if outcome == ClaimStatus.SUCCEEDED
        else "no such charge at the provider",
        result={"charge_id": charge.id, "amount": 5} if outcome == ClaimStatus.SUCCEEDED else None,
    )


@pytest.mark.parametrize("seat_held", [False, True], ids=["cancelled", "compensating"])
@pytest.mark.parametrize("how", ["crash", "raise"])
def test_a_charge_running_at_the_cancel_whose_answer_is_lost_goes_to_a_person_then_is_refunded(
    db, refunds, how, seat_held
):
    """Cancelled while `charge_card` runs; then its worker dies, or its call raises after
    the charge. Before the fix the step ended failed with its claim abandoned: nothing
    converged it, nothing refunded it, nobody was asked. Now its claim is unresolved;
    resolved as succeeded, its refund runs and the run ends cancelled again."""
    run, started = _charging(seat_held=seat_held)
    engine.cancel_run(run_id=run.id, actor="ann", reason="customer gave up")
    run.refresh_from_db()
    assert run.status == (RunStatus.COMPENSATING if seat_held else RunStatus.CANCELLED)
    if how == "crash":
        expire_leases()
        engine.sweep()
    else:
        assert fail_attempt(started, error="TimeoutError: no answer", uncertain=True) == "failed"

    step = step_of(run, "charge_card")
    assert step.status == StepStatus.UNRESOLVED
    assert claims(run, "charge_card") == [(started.claim.key, ClaimStatus.UNRESOLVED)]
    assert Event.objects.filter(run=run, type=events.CLAIM_UNRESOLVED).count() == 1
    run = drain(run)  # a seat's release, if any, runs meanwhile
    assert run.status == RunStatus.CANCELLED

    _decide_charge(run, ClaimStatus.SUCCEEDED)
    run = drain(run)
    assert run.status == RunStatus.CANCELLED
    assert len(refunds) == 1 and refunds[0]["amount"] == 5
    assert step_of(run, "refund_card").status == StepStatus.SUCCEEDED
    assert PaymentCharge.objects.filter(idempotency_key__startswith=f"{run.id}/").count() == 1


def test_a_charge_declined_after_the_cancel_needs_no_person_and_no_refund(db, refunds):
    """NotApplied after the cancel: the charge did not happen, so there is nothing to
    decide and nothing to undo."""
    run, started = _charging(seat_held=False)
    engine.cancel_run(run_id=run.id, actor="ann")
    assert fail_attempt(started, error="NotApplied: declined", uncertain=False) == "failed"
    assert step_of(run, "charge_card").status == StepStatus.FAILED
    assert claims(run, "charge_card") == [(started.claim.key, ClaimStatus.FAILED)]
    assert refunds == []
    assert not Step.objects.filter(run=run, key="refund_card").exists()


@pytest.mark.parametrize("seat_held", [False, True], ids=["cancelled", "compensating"])
def test_a_charge_waiting_for_its_retry_at_the_cancel_is_handed_to_a_person_at_once(
    db, refunds, seat_held
):
    """Cancelled while `charge_card` waits for its retry (its last call raised after
    charging). Before the fix the step stayed retrying and its claim in flight for ever
    (which also kept the run from retention). Now the cancel itself hands the claim to a
    person; resolved as failed, nothing is refunded and no claim is left open."""
    run, started = _charging(seat_held=seat_held)
    assert fail_attempt(started, error="TimeoutError: no answer", uncertain=True) == "retrying"
    engine.cancel_run(run_id=run.id, actor="ann")

    step = step_of(run, "charge_card")
    assert step.status == StepStatus.UNRESOLVED
    assert claims(run, "charge_card") == [(started.claim.key, ClaimStatus.UNRESOLVED)]
    run = drain(run)
    assert run.status == RunStatus.CANCELLED
    _decide_charge(run, ClaimStatus.FAILED)
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert step_of(run, "charge_card").status == StepStatus.FAILED
    assert refunds == []
    assert not Claim.objects.filter(
        run=run, status__in=[ClaimStatus.IN_FLIGHT, ClaimStatus.UNRESOLVED]
    ).exists()


def test_a_receipt_waiting_for_its_retry_at_the_cancel_ends_failed_with_its_claim_abandoned(db):
    """An idempotent step without a compensation, waiting for its retry at the cancel:
    nothing is to be undone, so no person is asked; its claim is closed (abandoned: safe
    to repeat under its key), not left in flight."""
    run = engine.submit_run(workflow="idempotent-beside-failure", input={})
    receipt = start_attempt(step_id=step_of(run, "send_receipt").id, worker="w")
    assert receipt is not None and receipt.claim is not None
    assert fail_attempt(receipt, error="TimeoutError", uncertain=True) == "retrying"
    engine.cancel_run(run_id=run.id, actor="ann")
    step = step_of(run, "send_receipt")
    assert step.status == StepStatus.FAILED
    assert claims(run, "send_receipt") == [(receipt.claim.key, ClaimStatus.ABANDONED)]


def test_a_guarded_step_waiting_for_its_retry_at_the_cancel_closes_its_claim_as_failed(db):
    """A guarded step retries only after NotApplied: at the cancel its effect did not
    happen, so its claim is closed failed, not left in flight."""
    run = engine.submit_run(workflow="compensated-deploy", input={})
    step = step_of(run, "deploy_release")
    Step.objects.filter(pk=step.id).update(max_attempts=3)
    started = start_attempt(step_id=step.id, worker="w")
    assert started is not None and started.claim is not None
    assert fail_attempt(started, error="NotApplied: busy", uncertain=False) == "retrying"
    engine.cancel_run(run_id=run.id, actor="ann")
    assert step_of(run, "deploy_release").status == StepStatus.FAILED
    assert claims(run, "deploy_release") == [(started.claim.key, ClaimStatus.FAILED)]
    assert Run.objects.get(pk=run.id).status == RunStatus.CANCELLED


def test_a_charge_that_succeeds_after_the_cancel_is_refunded_without_a_person(db, refunds):
    """The converging case needs no one: the running charge's answer arrives after the
    cancel, so its refund is planned at once."""
    run, started = _charging(seat_held=False)
    engine.cancel_run(run_id=run.id, actor="ann")
    charge = PaymentCharge.objects.get(idempotency_key=started.claim.key)
    finish_with_result(started, {"charge_id": charge.id, "amount": 5, "replayed": True})
    run = drain(run)
    assert run.status == RunStatus.CANCELLED
    assert [r["charge_id"] for r in refunds] == [charge.id]


# --- a retry resends the steps that waited for their own retry ---------------------------
@pytest.fixture
def published():
    """The step ids of every execute_step message this process publishes."""
    sent: list[int] = []

    def record(sender=None, body=None, **_):
        if sender == "runs.execute_step":
            sent.append(int(body[1]["step_id"]) if body[1] else int(body[0][0]))

    before_task_publish.connect(record, weak=False)
    try:
        yield sent
    finally:
        before_task_publish.disconnect(record)


def test_a_retry_resends_a_branch_that_waited_for_its_own_retry_when_the_run_failed(
    db, published, django_capture_on_commit_callbacks
):
    """`right_flaky` failed once and waits for its retry when `left_fails` fails the
    run; its retry's message is refused (the run failed). An operator's retry of
    `left_fails` must send `right_flaky` again too. Before the fix only queued steps
    were resent, and the branch waited for the sweeper's republish bound."""
    run = engine.submit_run(workflow="two-failing-branches", input={})
    right = start_attempt(step_id=step_of(run, "right_flaky").id, worker="w")
    assert right is not None
    assert fail_attempt(right, error="boom", uncertain=False) == "retrying"
    engine.execute_step(step_id=step_of(run, "left_fails").id, worker="w")
    assert Run.objects.get(pk=run.id).status == RunStatus.FAILED
    assert step_of(run, "right_flaky").status == StepStatus.RETRYING

    with django_capture_on_commit_callbacks(execute=True):
        engine.retry_steps(run_id=run.id, step_keys=["left_fails"], actor="ann")
    assert sorted(published) == sorted(
        [step_of(run, "left_fails").id, step_of(run, "right_flaky").id]
    )


def test_a_failed_refund_retried_after_its_answer_was_lost_keeps_its_key(db, refunds):
    """The same rule for an idempotent compensation: `refund_card` is declined for good
    (claim R failed, the run fails), retried (R/retry-2), and its every answer lost
    (abandoned); retried again, it keeps R/retry-2."""
    run, started = _charging(seat_held=False)
    charge = PaymentCharge.objects.get(idempotency_key=started.claim.key)
    finish_with_result(started, {"charge_id": charge.id, "amount": 5, "replayed": False})
    engine.cancel_run(run_id=run.id, actor="ann")
    refund = step_of(run, "refund_card")

    def attempts_until_failed(*, lost: bool) -> None:
        refund.refresh_from_db()
        while refund.status != StepStatus.FAILED:
            attempt = start_attempt(step_id=refund.id, worker="w")
            assert attempt is not None
            fail_attempt(attempt, error="TimeoutError" if lost else "NotApplied", uncertain=lost)
            due_now()
            refund.refresh_from_db()

    attempts_until_failed(lost=False)
    [(first, _)] = claims(run, "refund_card")
    assert Run.objects.get(pk=run.id).status == RunStatus.FAILED
    engine.retry_run(run_id=run.id, actor="ann")
    attempts_until_failed(lost=True)
    assert claims(run, "refund_card") == [
        (first, ClaimStatus.FAILED),
        (f"{first}/retry-2", ClaimStatus.ABANDONED),
    ]
    engine.retry_run(run_id=run.id, actor="ann")
    run = drain(run)
    assert run.status == RunStatus.CANCELLED
    assert claims(run, "refund_card") == [
        (first, ClaimStatus.FAILED),
        (f"{first}/retry-2", ClaimStatus.SUCCEEDED),
    ]
