"""reconciliation.webhooks in-process, against real PostgreSQL and a real HTTP receiver
on 127.0.0.1 (tests/support/receiver.py): each event enqueued once, the payload, the
signature, the backoff, giving up, and what /metrics says. Real workers delivering
while steps run: tests/integration/test_webhook_delivery.py."""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from datetime import datetime
from pathlib import Path

import pytest
from django.db import connection
from django.db.models.functions import Now

from reconciliation import webhooks
from reconciliation.models import WebhookDelivery
from reconciliation.tasks import send_webhooks
from runs import engine
from runs.models import Pause, PauseChange
from runs.ops import metrics
from runs.testing import run_inline
from runs.workflows import PURE, Breaker, Retry, Workflow
from tests.support.declared import registered
from tests.support.factories import crashed, crashed_merge
from tests.support.receiver import receiver

pytestmark = pytest.mark.django_db(transaction=True)

SECRET = "a-test-secret-of-some-length"

breaking = Workflow("webhook-breaker", 1)


@breaking.step(kind=PURE, retry=Retry(max_attempts=1), breaker=Breaker(outcomes=2, within=60))
def flaky(ctx):
    raise RuntimeError("down")


@pytest.fixture
def hook(settings):
    settings.RUNS_WEBHOOK_SECRET = SECRET
    settings.RUNS_WEBHOOK_TIMEOUT_SECONDS = 2
    settings.RUNS_WEBHOOK_BACKOFF_SECONDS = 10
    settings.RUNS_WEBHOOK_BACKOFF_MAX_SECONDS = 100
    settings.RUNS_WEBHOOK_MAX_TRIES = 3
    settings.RECONCILIATION_STALE_MINUTES = 60
    settings.RUNS_PUBLIC_URL = "https://runs.example.com"

    def use(**options):
        server = receiver(**options)
        state = server.__enter__()
        settings.RUNS_WEBHOOK_URL = state.url
        opened.append(server)
        return state

    opened: list = []
    yield use
    for server in opened:
        server.__exit__(None, None, None)


def waited(claim_id: int, seconds: float) -> None:
    """The claim became unresolved that long ago (database clock)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_claim SET unresolved_at = now() - make_interval(secs => %s) WHERE id = %s",
            [seconds, claim_id],
        )


def make_due() -> None:
    """Every pending row due now, instead of waiting out its backoff."""
    WebhookDelivery.objects.filter(status="pending").update(next_attempt_at=Now())


def _documented_verify():
    """The receiver's `verify` exactly as docs/operating.md#webhook prints it."""
    text = (Path(__file__).parents[2] / "docs" / "operating.md").read_text()
    [code] = [b for b in re.findall(r"```python\n(.*?)```", text, re.S) if "def verify(" in b]
    scope: dict[str, object] = {}
    exec(compile(code, "docs/operating.md#webhook", "exec"), scope)
    return scope["verify"]


def verifies(request) -> bool:
    """What docs/operating.md#webhook tells a receiver to check, with its own code."""
    return _documented_verify()(SECRET.encode(), request.headers, request.body)


def test_each_event_is_enqueued_once_however_often_the_scan_runs(hook, settings):
    hook()
    first, second = crashed(count=2)
    assert webhooks.enqueue_events() == 2
    assert webhooks.enqueue_events() == 0
    # One claim passes its SLA: its second event, once.
    waited(first.id, 3601)
    assert webhooks.enqueue_events() == 1
    assert webhooks.enqueue_events() == 0
    rows = sorted(WebhookDelivery.objects.values_list("claim_id", "event", "status", "tries"))
    assert rows == sorted(
        [
            (first.id, "claim_unresolved", "pending", 0),
            (second.id, "claim_unresolved", "pending", 0),
            (first.id, "claim_stale", "pending", 0),
        ]
    )
    stale = WebhookDelivery.objects.get(claim_id=first.id, event="claim_stale")
    first.refresh_from_db()
    assert stale.payload == {
        "event": "claim_stale",
        "claim_id": first.id,
        "run_id": str(first.run_id),
        "workflow": "merge-change",
        "step": first.step.name,
        "item_key": None,
        "key": first.key,
        "kind": "guarded",
        "unresolved_at": stale.payload["unresolved_at"],
        "url": f"https://runs.example.com/reconciliation/?claim={first.id}",
    }
    assert stale.payload["unresolved_at"].startswith(first.unresolved_at.date().isoformat())


def test_a_delivery_is_signed_and_marked_delivered(hook):
    state = hook()
    claim = crashed_merge()
    result = send_webhooks.apply().get()
    assert result == "1 enqueued; webhook: 1 delivered, 0 failed, 0 gave up"
    [request] = state.requests
    assert request.answered == 200
    assert verifies(request)
    assert request.payload["claim_id"] == claim.id
    assert request.payload["event"] == "claim_unresolved"
    row = WebhookDelivery.objects.get()
    assert request.headers["X-Durable-Runs-Delivery"] == str(row.id)
    assert request.headers["X-Durable-Runs-Event"] == "claim_unresolved"
    assert request.headers["Content-Type"] == "application/json"
    assert (row.status, row.tries, row.last_error) == ("delivered", 1, "")
    assert row.delivered_at is not None
    assert [h["outcome"] for h in row.history] == ["delivered"]
    # Nothing is sent twice.
    assert send_webhooks.apply().get() == "0 enqueued; webhook: 0 delivered, 0 failed, 0 gave up"
    assert len(state.requests) == 1


def test_a_tampered_body_or_an_old_timestamp_does_not_verify(hook):
    state = hook()
    crashed_merge()
    send_webhooks.apply().get()
    [request] = state.requests
    assert verifies(request)
    request.body = request.body.replace(b"merge-change", b"merge-changf")
    assert not verifies(request)
    body, timestamp = b'{"a":1}', str(int(time.time()) - 3600)
    signed = webhooks.sign(
        body, timestamp=timestamp, delivery="7", event="claim_unresolved", secret=SECRET
    )
    assert (
        signed
        == "sha256="
        + hmac.new(
            SECRET.encode(), timestamp.encode() + b".7.claim_unresolved." + body, hashlib.sha256
        ).hexdigest()
    )
    old = type(request)(request.headers | {"X-Durable-Runs-Timestamp": timestamp}, body)
    old.headers["X-Durable-Runs-Signature"] = signed
    assert not verifies(old)


@pytest.mark.parametrize(
    ("header", "value"),
    [("X-Durable-Runs-Delivery", "999999"), ("X-Durable-Runs-Event", "claim_stale")],
)
def test_a_delivery_replayed_under_a_new_id_or_as_another_event_does_not_verify(
    hook, header, value
):
    """Receivers drop a repeat by its delivery id: a captured delivery sent again at once
    with a new id would be a new event to them, unless the id is signed."""
    state = hook()
    crashed_merge()
    send_webhooks.apply().get()
    [request] = state.requests
    assert verifies(request)
    request.headers = {**request.headers, header: value}
    assert not verifies(request)


def test_failures_back_off_exponentially_then_the_row_is_kept_as_failed(hook):
    state = hook(failures=100)
    crashed_merge()
    gave_up = metrics.WEBHOOKS.labels("claim_unresolved", "gave_up")
    before = gave_up._value.get()
    assert send_webhooks.apply().get() == "1 enqueued; webhook: 0 delivered, 1 failed, 0 gave up"
    # Not due again yet: nothing is sent.
    assert webhooks.deliver_due().line() == "webhook: 0 delivered, 0 failed, 0 gave up"
    for _ in range(2):
        make_due()
        webhooks.deliver_due()
    row = WebhookDelivery.objects.get()
    assert (row.status, row.tries, row.last_error) == ("failed", 3, "HTTP 500")
    assert [h["outcome"] for h in row.history] == ["failed", "failed", "gave_up"]
    assert [h["status_code"] for h in row.history] == [500, 500, 500]
    assert len(state.requests) == 3
    assert gave_up._value.get() == before + 1

    # The delays: base 10 s, doubled, jitter below 1.5x; none after the last try.
    def delay(entry):
        return (
            datetime.fromisoformat(entry["next_attempt_at"]) - datetime.fromisoformat(entry["at"])
        ).total_seconds()

    first, second = delay(row.history[0]), delay(row.history[1])
    assert 10 <= first < 15
    assert 20 <= second < 30
    assert row.history[2]["next_attempt_at"] is None
    # A failed row is never taken again.
    make_due()
    assert webhooks.deliver_one() is None


def test_backoff_is_capped(hook, settings):
    settings.RUNS_WEBHOOK_BACKOFF_SECONDS = 10
    settings.RUNS_WEBHOOK_BACKOFF_MAX_SECONDS = 100
    assert [webhooks.backoff(n) <= 100 for n in range(1, 12)] == [True] * 11
    assert webhooks.backoff(11) == 100
    delays = [webhooks.backoff(n) for n in range(1, 4)]
    assert delays == sorted(delays) and 10 <= delays[0] < 15


def test_a_redirect_or_an_unreachable_receiver_is_a_failure(hook, settings):
    hook(status=302)
    crashed(count=1)
    webhooks.enqueue_events()
    webhooks.deliver_due()
    row = WebhookDelivery.objects.get()
    assert (row.status, row.tries, row.last_error) == ("pending", 1, "HTTP 302")
    # Nobody listens there.
    settings.RUNS_WEBHOOK_URL = "http://127.0.0.1:9/hook"
    make_due()
    webhooks.deliver_due()
    row.refresh_from_db()
    assert row.tries == 2
    assert row.last_error.startswith("ConnectionRefusedError")


def test_off_unless_configured(settings):
    settings.RUNS_WEBHOOK_URL = ""
    crashed_merge()
    assert send_webhooks.apply().get() == "webhook off (RUNS_WEBHOOK_URL unset)"
    assert WebhookDelivery.objects.count() == 0


def metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"{name} not in /metrics")


def test_metrics_count_what_is_pending(hook, client):
    hook(failures=100)
    crashed(count=2)
    text = client.get("/metrics").content.decode()
    assert metric(text, "durable_runs_webhook_pending") == 0
    webhooks.enqueue_events()
    text = client.get("/metrics").content.decode()
    assert metric(text, "durable_runs_webhook_pending") == 2
    assert metric(text, "durable_runs_oldest_webhook_pending_age_seconds") >= 0


@pytest.mark.parametrize(
    ("env", "refusal"),
    [
        (
            {"RUNS_WEBHOOK_URL": "ftp://hooks.example.com/x", "RUNS_WEBHOOK_SECRET": SECRET},
            "RUNS_WEBHOOK_URL must be an http:// or https:// URL, not 'ftp://hooks.example.com/x'",
        ),
        (
            {"RUNS_WEBHOOK_URL": "https://hooks.example.com/x", "RUNS_WEBHOOK_SECRET": "short"},
            "RUNS_WEBHOOK_SECRET must be set (16 characters or more) when RUNS_WEBHOOK_URL is: "
            "receivers check each delivery's signature with it",
        ),
        (
            {
                "RUNS_WEBHOOK_URL": "https://hooks.example.com/x",
                "RUNS_WEBHOOK_SECRET": SECRET,
                "RUNS_WEBHOOK_MAX_TRIES": "0",
            },
            "RUNS_WEBHOOK_MAX_TRIES must be a whole number of at least 1, not '0'",
        ),
    ],
    ids=["not-http", "no-secret", "no-tries"],
)
def test_a_misconfigured_webhook_is_one_line_at_start(tmp_path, env, refusal):
    from tests.operations.test_settings import clean_env, run

    result = run(["manage.py", "check"], clean_env(tmp_path, DEBUG="1", **env))
    assert (result.returncode, result.stderr, result.stdout) == (1, refusal + "\n", "")


def test_the_verification_snippet_in_the_docs_accepts_a_delivery_and_refuses_a_forgery(hook):
    from tests.support.places import ROOT

    text = (ROOT / "docs" / "operating.md").read_text()
    section = text[text.index("## Webhook") :]
    snippet = section[section.index("```python\n") + 10 :]
    snippet = snippet[: snippet.index("```")]
    namespace: dict = {}
    exec(snippet, namespace)
    verify = namespace["verify"]

    state = hook()
    crashed_merge()
    send_webhooks.apply().get()
    [request] = state.requests
    assert verify(SECRET.encode(), request.headers, request.body)
    assert not verify(b"another-secret-entirely", request.headers, request.body)
    assert not verify(SECRET.encode(), request.headers, request.body + b" ")


def test_the_outbox_command_lists_what_is_undelivered_and_resends_a_failed_one(hook, settings):
    from io import StringIO

    from django.core.management import CommandError, call_command

    state = hook(failures=1)
    settings.RUNS_WEBHOOK_MAX_TRIES = 1
    crashed(count=2)
    webhooks.enqueue_events()
    webhooks.deliver_due()  # the first fails, and with one try is kept as failed
    make_due()
    webhooks.deliver_due()  # the second is delivered
    failed = WebhookDelivery.objects.get(status="failed")
    delivered = WebhookDelivery.objects.get(status="delivered")

    out = StringIO()
    call_command("webhook_outbox", stdout=out)
    [line] = out.getvalue().splitlines()
    assert line.startswith(f"{failed.id} claim_unresolved claim {failed.claim_id} failed tries 1 ")
    assert line.endswith(" last error: HTTP 500")

    # Only failed ones can be sent again; a refusal changes nothing.
    with pytest.raises(CommandError) as refused:
        call_command("webhook_outbox", "--resend", str(failed.id), str(delivered.id), "999999")
    assert str(refused.value) == (
        f"only a failed webhook delivery can be sent again, not {delivered.id} (delivered), "
        "999999 (no such delivery); nothing was changed"
    )
    failed.refresh_from_db()
    assert (failed.status, failed.tries) == ("failed", 1)

    out = StringIO()
    call_command("webhook_outbox", "--resend", str(failed.id), stdout=out)
    assert out.getvalue() == f"1 webhook deliveries sent again: [{failed.id}]\n"
    webhooks.deliver_due()
    failed.refresh_from_db()
    assert (failed.status, failed.tries) == ("delivered", 1)
    assert [h["outcome"] for h in failed.history] == ["gave_up", "resent", "delivered"]
    assert len(state.successes()) == 2


def test_a_breaker_pause_is_announced_once_signed_even_if_resumed_before_the_scan(hook):
    state = hook()
    with registered(breaking):
        for _ in range(2):
            run_inline("webhook-breaker", input={})
        pause = Pause.objects.get(workflow="webhook-breaker")
        engine.pause(workflow="webhook-breaker", actor="ann", reason="a person's pause")
        engine.resume(pause_id=pause.id, actor="ann", reason="back")  # before any scan

        assert send_webhooks.apply().get() == (
            "1 enqueued; webhook: 1 delivered, 0 failed, 0 gave up"
        )
        assert webhooks.enqueue_events() == 0

    [request] = state.requests
    assert verifies(request)
    assert request.headers["X-Durable-Runs-Event"] == "step_paused_by_breaker"
    change = PauseChange.objects.get(pause_id=pause.id, action="pause")
    assert request.payload == {
        "event": "step_paused_by_breaker",
        "pause_id": pause.id,
        "workflow": "webhook-breaker",
        "step": "flaky",
        "outcomes": 2,
        "threshold": 2,
        "within_seconds": 60.0,
        "actor": "engine:breaker",
        "reason": "breaker: 2 failed or unknown outcomes of flaky in the last 60 s (threshold 2)",
        "paused_at": request.payload["paused_at"],
        "url": "https://runs.example.com/pauses/",
    }
    assert request.payload["paused_at"].startswith(change.at.date().isoformat())
    row = WebhookDelivery.objects.get()
    assert (row.event, row.pause_id, row.claim_id, row.status) == (
        "step_paused_by_breaker",
        pause.id,
        None,
        "delivered",
    )
