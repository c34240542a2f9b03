"""The invariants that live in the database reject bad rows whoever writes them."""

from __future__ import annotations

import pytest
from django.db import IntegrityError, connection, transaction
from django.db.models.functions import Now

from runs import engine
from runs.models import Attempt, Claim, Event, Step

# These tests write rows directly to prove the database rejects bad ones.
pytestmark = pytest.mark.tampers


def violated(name: str):
    """Expect the named constraint to reject the statement."""

    class Ctx:
        def __enter__(self):
            self.atomic = transaction.atomic()
            self.atomic.__enter__()

        def __exit__(self, exc_type, exc, tb):
            self.atomic.__exit__(exc_type, exc, tb)
            assert exc_type is not None and issubclass(exc_type, IntegrityError), "not rejected"
            assert name in str(exc), str(exc)
            return True

    return Ctx()


@pytest.fixture
def run(db):
    return engine.submit_run(workflow="charge-payment", input={"amount": 1})


def test_claim_key_is_unique(run):
    step = Step.objects.get(run=run)
    Claim.objects.create(key="k", run=run, step=step, kind="idempotent")
    with violated("claim_key_unique"):
        Claim.objects.create(key="k", run=run, step=step, kind="idempotent")


def test_claim_resolution_fields_iff_resolved(run):
    step = Step.objects.get(run=run)
    with violated("claim_resolution_iff_resolved"):
        Claim.objects.create(
            key="a",
            run=run,
            step=step,
            kind="guarded",
            status="unresolved",
            unresolved_at=Now(),
            resolved_by="ann",
            resolved_at=Now(),
        )
    with violated("claim_resolution_iff_resolved"):
        Claim.objects.create(
            key="b",
            run=run,
            step=step,
            kind="guarded",
            status="succeeded",
            resolved_by="",
            resolved_at=Now(),
        )


def test_unresolved_claim_knows_since_when(run):
    step = Step.objects.get(run=run)
    with violated("claim_unresolved_since_known"):
        Claim.objects.create(key="a", run=run, step=step, kind="guarded", status="unresolved")


def test_one_attempt_number_per_step_and_one_running(run):
    step = Step.objects.get(run=run)
    Attempt.objects.create(step=step, run=run, number=1, lease_expires_at=Now())
    with violated("attempt_step_number_unique"):
        Attempt.objects.create(
            step=step, run=run, number=1, lease_expires_at=Now(), status="failed", finished_at=Now()
        )
    with violated("attempt_one_running_per_step"):
        Attempt.objects.create(step=step, run=run, number=2, lease_expires_at=Now())


def test_event_seq_unique_per_run(run):
    with violated("event_run_seq_unique"):
        Event.objects.create(run=run, seq=1, type="x")


@pytest.mark.parametrize(
    ("sql", "name"),
    [
        ("UPDATE runs_step SET status = 'bogus'", "step_status_valid"),
        ("UPDATE runs_run SET status = 'succeeded'", "run_finished_at_iff_finished"),
        ("UPDATE runs_claim SET status = 'maybe'", "claim_status_valid"),
        ("UPDATE runs_step SET attempts = max_attempts + 1", "step_attempts_bounded"),
    ],
)
def test_check_constraints_reject_raw_sql(run, sql, name):
    Claim.objects.create(key="k", run=run, step=Step.objects.get(run=run), kind="idempotent")
    with violated(name), connection.cursor() as cursor:
        cursor.execute(sql)
