"""Retrying a failed run's steps as the run page invites it: after a condition raised,
beside a skipped step, after a resolution of the failed run, beside a waiting branch.
A retry puts the run's plan back as if the failed steps had not run yet: every step is
decided by the rules that decide it the first time."""

from __future__ import annotations

from typing import Any

import pytest

from examples.models import TargetRecord
from reconciliation.services import resolve_claim
from runs import engine
from runs.models import Claim, Run, Step
from runs.states import ClaimStatus, RunStatus, StepStatus
from runs.testing import on_commit_callbacks_run, run_inline
from runs.workflows import GUARDED, PURE, TRANSACTIONAL, Context, Retry, Workflow
from tests.support.declared import declared

pytestmark = pytest.mark.django_db

# --- a condition that raises until a test says otherwise --------------------------------
# APPROVALS[run_id]: what the approvals service answers; absent, it raises (it did not
# answer). PAID lists the runs whose payout ran.
APPROVALS: dict[str, bool] = {}
PAID: list[str] = []


def approved(ctx: Context) -> bool:
    if ctx.run_id not in APPROVALS:
        raise RuntimeError("the approvals service did not answer")
    return APPROVALS[ctx.run_id]


flaky_condition = Workflow("flaky-condition", version=1)


@flaky_condition.step(kind=PURE)
def ask_approval(ctx: Context) -> str:
    return "asked"


@flaky_condition.step(kind=PURE, when=approved)
def pay_out(ctx: Context) -> str:
    PAID.append(ctx.run_id)
    return "paid"


flaky_condition_map = Workflow("flaky-condition-map", version=1)


@flaky_condition_map.step(kind=PURE)
def list_payees(ctx: Context) -> list[int]:
    return [1, 2, 3, 4, 5]


@flaky_condition_map.map_step(over="list_payees", batch_size=2, kind=TRANSACTIONAL, when=approved)
def pay_each(ctx: Context, payee: int) -> None:
    TargetRecord.objects.create(record_id=payee, run_id=ctx.run_id)


# --- a map whose items are named by a directory that does not know them yet ------------
# ACCOUNTS[payee]: the account that names a payee's item; absent, the key function
# raises, so the engine refuses the list and the map never expands (a test fills it in).
ACCOUNTS: dict[int, str] = {}

refused_map = Workflow("refused-then-known-map", version=1)


@refused_map.step(kind=PURE)
def list_known_payees(ctx: Context) -> list[int]:
    return [1, 2, 3, 4, 5]


@refused_map.map_step(
    over="list_known_payees", batch_size=2, kind=TRANSACTIONAL, key=lambda payee: ACCOUNTS[payee]
)
def pay_account(ctx: Context, payee: int) -> None:
    TargetRecord.objects.create(record_id=payee, run_id=ctx.run_id)


# --- a skipped step beside a branch that fails once: its dependent waits on both --------
skip_beside_failure = Workflow("skip-beside-failure", version=1)


@skip_beside_failure.step(kind=PURE)
def triage(ctx: Context) -> str:
    return "triaged"


@skip_beside_failure.step(kind=PURE, after=["triage"], when=lambda ctx: False)
def escalate(ctx: Context) -> str:
    return "escalated"


@skip_beside_failure.step(kind=PURE, after=["triage"], retry=Retry(max_attempts=1))
def notify_once(ctx: Context) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("the mail server refused the first attempt")
    return "notified"


@skip_beside_failure.step(kind=PURE, after=["escalate", "notify_once"])
def close_ticket(ctx: Context) -> str:
    return "closed"


# --- a guarded step left unresolved beside a branch that fails once, both before one end --
guarded_beside_flaky = Workflow("guarded-beside-flaky", version=1)


@guarded_beside_flaky.step(kind=GUARDED, after=[])
def deploy_later(ctx: Context) -> dict[str, Any]:
    raise TimeoutError("deploy API timed out")


@guarded_beside_flaky.step(kind=PURE, after=[], retry=Retry(max_attempts=1))
def flaky_once(ctx: Context) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("fails on its first attempt")
    return "fine"


@guarded_beside_flaky.step(kind=PURE, after=["deploy_later", "flaky_once"])
def wrap_up(ctx: Context) -> str:
    return "wrapped up"


_workflows = declared(
    flaky_condition, flaky_condition_map, refused_map, skip_beside_failure, guarded_beside_flaky
)


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def _drive(run: Run) -> Run:
    while step := Step.objects.filter(run=run, status=StepStatus.QUEUED).order_by("id").first():
        with on_commit_callbacks_run():
            engine.execute_step(step_id=step.id, worker="t")
    run.refresh_from_db()
    return run


def _retry(run: Run, *keys: str) -> Run:
    with on_commit_callbacks_run():
        return engine.retry_steps(run_id=run.id, step_keys=list(keys), actor="ann")


def test_a_step_whose_condition_raised_is_decided_by_its_condition_again_on_retry(monkeypatch):
    run = run_inline(flaky_condition)
    assert run.status == RunStatus.FAILED
    assert step_of(run, "pay_out").status == StepStatus.FAILED
    monkeypatch.setitem(APPROVALS, str(run.id), False)  # the service answers now: no

    run = _drive(_retry(run, "pay_out"))

    assert step_of(run, "pay_out").status == StepStatus.SKIPPED
    assert str(run.id) not in PAID  # no payout without its approval
    assert run.status == RunStatus.SUCCEEDED


def test_a_map_step_whose_condition_raised_expands_on_retry(monkeypatch):
    run = run_inline(flaky_condition_map)
    assert step_of(run, "pay_each").status == StepStatus.FAILED
    monkeypatch.setitem(APPROVALS, str(run.id), True)

    run = _drive(_retry(run, "pay_each"))

    assert run.status == RunStatus.SUCCEEDED
    assert Step.objects.filter(run=run, parent__isnull=False).count() == 3  # 5 items by 2
    assert sorted(
        TargetRecord.objects.filter(run_id=run.id).values_list("record_id", flat=True)
    ) == [
        1,
        2,
        3,
        4,
        5,
    ]


def test_a_map_step_whose_list_was_refused_expands_on_retry(monkeypatch):
    run = run_inline(refused_map)  # the directory knows no payee yet
    pay = step_of(run, "pay_account")
    assert (run.status, pay.status) == (RunStatus.FAILED, StepStatus.FAILED)
    assert pay.error == (
        "map step 'pay_account': its key function raised KeyError(1) on item [0] of the "
        "list from 'list_known_payees'"
    )
    assert not Step.objects.filter(run=run, parent__isnull=False).exists()  # never expanded
    for payee in range(1, 6):
        monkeypatch.setitem(ACCOUNTS, payee, f"acct-{payee}")

    run = _drive(_retry(run, "pay_account"))

    assert run.status == RunStatus.SUCCEEDED
    assert step_of(run, "pay_account").status == StepStatus.SUCCEEDED
    assert Step.objects.filter(run=run, parent__isnull=False).count() == 3  # 5 items by 2
    assert sorted(
        Claim.objects.filter(run=run, item_key__isnull=False).values_list("item_key", "status")
    ) == [(f"acct-{n}", ClaimStatus.SUCCEEDED) for n in range(1, 6)]
    assert sorted(
        TargetRecord.objects.filter(run_id=run.id).values_list("record_id", flat=True)
    ) == [1, 2, 3, 4, 5]


def test_a_retry_beside_a_skipped_step_lets_their_dependent_run():
    run = run_inline(skip_beside_failure)
    assert run.status == RunStatus.FAILED
    assert step_of(run, "escalate").status == StepStatus.SKIPPED

    run = _drive(_retry(run, "notify_once"))

    assert step_of(run, "close_ticket").status == StepStatus.SUCCEEDED
    assert run.status == RunStatus.SUCCEEDED


@pytest.mark.parametrize("decided_by", ["operator", "probe answer"])
def test_resolving_a_claim_of_a_failed_run_then_retrying_finishes_the_run(decided_by):
    run = run_inline(guarded_beside_flaky)
    assert run.status == RunStatus.FAILED
    claim = Claim.objects.get(run=run, step__name="deploy_later")
    assert claim.status == ClaimStatus.UNRESOLVED
    actor = "ann" if decided_by == "operator" else "probe"
    with on_commit_callbacks_run():
        resolve_claim(claim.id, ClaimStatus.SUCCEEDED, actor=actor, note="it deployed")
    assert step_of(run, "deploy_later").status == StepStatus.SUCCEEDED

    run = _drive(_retry(run, "flaky_once"))

    assert {s.key: s.status for s in Step.objects.filter(run=run)} == {
        "deploy_later": StepStatus.SUCCEEDED,
        "flaky_once": StepStatus.SUCCEEDED,
        "wrap_up": StepStatus.SUCCEEDED,
    }
    assert (run.status, run.steps_remaining) == (RunStatus.SUCCEEDED, 0)


def test_a_retried_run_with_a_branch_still_waiting_is_waiting():
    run = run_inline("wait-beside-failure")
    assert run.status == RunStatus.FAILED
    assert step_of(run, "hold_for_go").status == StepStatus.WAITING

    run = _retry(run, "fail_first")
    assert run.status == RunStatus.WAITING  # a step waits (fail_first runs meanwhile)
    run = _drive(run)
    assert run.status == RunStatus.WAITING  # only the wait is left
    with on_commit_callbacks_run():
        engine.send_signal(run_id=run.id, name="go_ahead", payload=None, actor="ann")
    assert _drive(run).status == RunStatus.SUCCEEDED


def test_a_retried_wait_that_timed_out_waits_again_with_a_new_timer():
    run = run_inline("wait-approval", input={"order": 3})  # its timeout is skipped
    assert (run.status, step_of(run, "approval").status) == (RunStatus.FAILED, "failed")

    run = _drive(_retry(run, "approval"))

    assert run.status == RunStatus.WAITING
    approval = step_of(run, "approval")
    assert approval.status == StepStatus.WAITING
    assert approval.wake_at is not None and approval.wake_at > approval.queued_at
