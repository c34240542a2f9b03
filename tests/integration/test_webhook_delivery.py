"""The webhook with real workers and a real beat (docs/operating.md#webhook): a guarded
step that raises leaves its claim unresolved, and a receiver on 127.0.0.1 that fails
and then recovers gets exactly one successful, verifiable delivery per event, after
retries whose recorded delays grow; a receiver that hangs delays no step."""

from __future__ import annotations

import hashlib
import hmac
from datetime import datetime

from reconciliation.models import WebhookDelivery
from runs import engine
from runs.models import Claim, Run
from runs.states import ClaimStatus, RunStatus
from tests.support.receiver import receiver
from tests.support.waiting import wait_for

SECRET = "integration-test-secret"


def hook_env(url: str, **extra: str) -> dict[str, str]:
    return {
        "RUNS_WEBHOOK_URL": url,
        "RUNS_WEBHOOK_SECRET": SECRET,
        "RUNS_WEBHOOK_INTERVAL": "0.3",
        "RUNS_WEBHOOK_BACKOFF_SECONDS": "0.5",
        "RUNS_WEBHOOK_BACKOFF_MAX_SECONDS": "30",
        # Long enough that an answered request is never taken for a timeout on a busy
        # machine (that would be a second delivery, as the docs warn receivers).
        "RUNS_WEBHOOK_TIMEOUT_SECONDS": "10",
        **extra,
    }


def unresolved_claim() -> Claim:
    """A guarded step that raises: its claim waits for a person."""
    run = engine.submit_run(workflow="flaky-merge", input={"change_id": 7, "mode": "timeout"})
    return wait_for(
        lambda: Claim.objects.filter(run=run, status=ClaimStatus.UNRESOLVED).first(),
        timeout=60,
        what="the claim to become unresolved",
    )


def signed_correctly(request) -> bool:
    headers = request.headers
    signed = (
        f"{headers['X-Durable-Runs-Timestamp']}.{headers['X-Durable-Runs-Delivery']}."
        f"{headers['X-Durable-Runs-Event']}.".encode()
        + request.body
    )
    mac = hmac.new(SECRET.encode(), signed, hashlib.sha256)
    return headers["X-Durable-Runs-Signature"] == f"sha256={mac.hexdigest()}"


def delays(row: WebhookDelivery) -> list[float]:
    return [
        (
            datetime.fromisoformat(h["next_attempt_at"]) - datetime.fromisoformat(h["at"])
        ).total_seconds()
        for h in row.history
        if h["outcome"] == "failed"
    ]


def test_a_receiver_that_fails_then_recovers_gets_each_event_once(cluster):
    # The SLA at 3 s, so the same claim also makes the "past its SLA" event.
    with receiver(failures=4) as state:
        env = hook_env(state.url, RECONCILIATION_STALE_MINUTES="0.05")
        cluster.worker(**env)
        cluster.beat(**env)
        claim = unresolved_claim()
        wait_for(
            lambda: (
                WebhookDelivery.objects.filter(claim_id=claim.id, status="delivered").count() == 2
            ),
            timeout=90,
            what="both events delivered",
            on_timeout=cluster.logs,
        )
        cluster.stop_all()

        rows = {r.event: r for r in WebhookDelivery.objects.filter(claim_id=claim.id)}
        assert sorted(rows) == ["claim_stale", "claim_unresolved"]
        assert WebhookDelivery.objects.count() == 2
        # Exactly one successful delivery per event, each verifiable with the secret.
        successes = state.successes()
        assert sorted((r.payload["event"], r.payload["claim_id"]) for r in successes) == [
            ("claim_stale", claim.id),
            ("claim_unresolved", claim.id),
        ]
        assert all(signed_correctly(r) for r in state.requests)
        assert len(state.requests) == 4 + 2  # the four 500s, then one 200 each
        # The four failures were retried with growing delays (recorded, not slept).
        assert sum(r.tries for r in rows.values()) == 6
        for row in rows.values():
            waits = delays(row)
            assert waits == sorted(waits) and len(set(waits)) == len(waits), row.history
            for n, wait in enumerate(waits):
                assert 0.5 * 2**n <= wait < 0.75 * 2**n, row.history
            assert row.history[-1]["outcome"] == "delivered"
            # Each try came no earlier than the time its predecessor set.
            for before, after in zip(row.history, row.history[1:], strict=False):
                due = datetime.fromisoformat(before["next_attempt_at"])
                assert datetime.fromisoformat(after["at"]) >= due
        assert any(delays(row) for row in rows.values())


def test_a_hanging_receiver_delays_no_step(cluster):
    with receiver(hang=True) as state:
        env = hook_env(state.url, RUNS_WEBHOOK_TIMEOUT_SECONDS="1")
        cluster.worker(**env)
        cluster.worker(**env)
        cluster.beat(**env)
        claim = unresolved_claim()
        wait_for(lambda: state.requests, timeout=60, what="a delivery to reach the receiver")

        # While every delivery hangs until it times out, steps keep finishing.
        runs = [
            engine.submit_run(workflow="charge-payment", input={"amount": n + 1}) for n in range(5)
        ]
        wait_for(
            lambda: (
                Run.objects.filter(pk__in=[r.pk for r in runs], status=RunStatus.SUCCEEDED).count()
                == 5
            ),
            timeout=60,
            what="the runs to finish while the receiver hangs",
            on_timeout=cluster.logs,
        )
        assert state.hang and not state.successes()
        row = wait_for(
            lambda: WebhookDelivery.objects.filter(claim_id=claim.id, tries__gte=1).first(),
            timeout=30,
            what="the hung try recorded",
        )
        assert row.status == "pending"
        assert "timed out" in row.last_error or "Timeout" in row.last_error, row.last_error

        # The receiver comes back: the event is delivered, once.
        state.release()
        wait_for(
            lambda: WebhookDelivery.objects.filter(claim_id=claim.id, status="delivered").exists(),
            timeout=60,
            what="the event delivered after the receiver recovered",
            on_timeout=cluster.logs,
        )
        cluster.stop_all()
        [success] = state.successes()
        assert success.payload["claim_id"] == claim.id
        assert signed_correctly(success)
