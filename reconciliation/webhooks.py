"""The signed webhook, from a durable outbox (docs/operating.md#webhook).

Two halves, both run by the `reconciliation.webhooks` task every RUNS_WEBHOOK_INTERVAL:

- enqueue_events(): one statement per event kind, `INSERT … SELECT … ON CONFLICT DO
  NOTHING` from the unresolved claims (their partial index) into the outbox, whose
  UNIQUE(claim_id, event) makes each event enqueued once however many scans or beats
  run. A scan, not a write in the engine's transaction that makes a claim unresolved:
  the engine stays as it is (no step ever waits on the outbox, let alone the network),
  and the same scan finds the claims past their SLA, which no transition announces. The
  cost: a claim that a probe resolves within one interval is never announced, which is
  what an operator wants anyway.
- deliver_due(): takes one due row at a time with `FOR UPDATE SKIP LOCKED` and POSTs it
  while holding it, so two deliverers never send the same row at once; the outcome is
  written in that same transaction. A deliverer killed mid-POST leaves its row pending
  (its transaction rolls back): delivery is at least once, and receivers drop a repeat
  by the X-Durable-Runs-Delivery header. It stops at the first failure (the receiver is
  down; the next interval tries again) and after RUNS_WEBHOOK_INTERVAL seconds, so a
  hanging receiver holds one worker process for at most one timeout per interval.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import random
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from runs import sql
from runs.ops import metrics
from runs.states import ClaimStatus

from .models import WebhookDelivery

SQL = sql.load(__file__)

SIGNATURE_HEADER = "X-Durable-Runs-Signature"
TIMESTAMP_HEADER = "X-Durable-Runs-Timestamp"
DELIVERY_HEADER = "X-Durable-Runs-Delivery"
EVENT_HEADER = "X-Durable-Runs-Event"

Event = WebhookDelivery.Event
Status = WebhookDelivery.Status


def enabled() -> bool:
    return bool(settings.RUNS_WEBHOOK_URL)


def enqueue_events() -> int:
    """Write an outbox row for each new unresolved claim, each claim past
    RECONCILIATION_STALE_MINUTES and each pause the engine's breaker made
    (step_paused_by_breaker) that has none; how many were written."""
    stale_after = float(settings.RECONCILIATION_STALE_MINUTES) * 60
    written = 0
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        for event, min_age in ((Event.CLAIM_UNRESOLVED, 0.0), (Event.CLAIM_STALE, stale_after)):
            cursor.execute(
                SQL["enqueue"],
                {
                    "event": event.value,
                    "min_age": min_age,
                    "base": settings.RUNS_PUBLIC_URL,
                    "pending": Status.PENDING.value,
                    "unresolved": ClaimStatus.UNRESOLVED.value,
                },
            )
            written += cursor.rowcount
        cursor.execute(
            SQL["enqueue_breaker"],
            {
                "event": Event.STEP_PAUSED_BY_BREAKER.value,
                "base": settings.RUNS_PUBLIC_URL,
                "pending": Status.PENDING.value,
            },
        )
        written += int(cursor.rowcount)
    return written


def sign(body: bytes, *, timestamp: str, delivery: str, event: str, secret: str) -> str:
    """`sha256=` and the hex HMAC-SHA256, keyed by the secret, of
    `<timestamp>.<delivery>.<event>.<body>`. Every header a receiver acts on is signed:
    the timestamp, so a captured delivery cannot be replayed later with a fresh one; the
    delivery id, which receivers dedupe by, so it cannot be replayed at once under a new
    id as a new event; and the event, so it cannot be passed off as another kind."""
    signed = f"{timestamp}.{delivery}.{event}.".encode() + body
    return "sha256=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def backoff(tries: int) -> float:
    """Seconds before the next try after `tries` failed ones: the base doubled each time,
    times a jitter in [1, 1.5) so receivers coming back are not hit all at once, capped.
    Below the cap each delay is longer than any the previous try could have had."""
    base = float(settings.RUNS_WEBHOOK_BACKOFF_SECONDS)
    delay = base * 2 ** (tries - 1) * (1 + random.random() / 2)
    return float(min(delay, float(settings.RUNS_WEBHOOK_BACKOFF_MAX_SECONDS)))


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A redirect is a failure: urllib would follow it as a GET, without the body."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_opener = urllib.request.build_opener(_NoRedirects)


def post(delivery_id: int, event: str, payload: dict[str, Any]) -> tuple[int | None, str]:
    """POST one event; (HTTP status or None, error: empty on a 2xx)."""
    body = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    timestamp = str(int(time.time()))
    request = urllib.request.Request(
        settings.RUNS_WEBHOOK_URL,
        data=body,
        method="POST",
        headers={
            "Content-Type": "application/json",
            "User-Agent": "durable-runs-webhook",
            SIGNATURE_HEADER: sign(
                body,
                timestamp=timestamp,
                delivery=str(delivery_id),
                event=event,
                secret=settings.RUNS_WEBHOOK_SECRET,
            ),
            TIMESTAMP_HEADER: timestamp,
            DELIVERY_HEADER: str(delivery_id),
            EVENT_HEADER: event,
        },
    )
    try:
        with _opener.open(request, timeout=settings.RUNS_WEBHOOK_TIMEOUT_SECONDS) as answer:
            return answer.status, ""
    except urllib.error.HTTPError as error:
        return error.code, f"HTTP {error.code}"
    except (urllib.error.URLError, OSError) as error:
        reason = getattr(error, "reason", error)
        return None, f"{type(reason).__name__}: {reason}"[:500]


@dataclass
class Delivered:
    delivered: int = 0
    failed: int = 0
    gave_up: int = 0
    ids: list[int] = field(default_factory=list)

    def line(self) -> str:
        return f"webhook: {self.delivered} delivered, {self.failed} failed, {self.gave_up} gave up"


def deliver_one() -> tuple[int, str] | None:
    """Deliver the most overdue pending row, if any: (its id, outcome)."""
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(SQL["take_due"], {"pending": Status.PENDING.value})
        row = cursor.fetchone()
        if row is None:
            return None
        delivery_id, event, payload, tries = row
        if isinstance(payload, str):
            payload = json.loads(payload)
        code, error = post(delivery_id, event, payload)
        if not error:
            outcome = "delivered"
            cursor.execute(
                SQL["mark_delivered"],
                {
                    "id": delivery_id,
                    "code": code,
                    "delivered": Status.DELIVERED.value,
                    "pending": Status.PENDING.value,
                },
            )
        else:
            done = tries + 1 >= settings.RUNS_WEBHOOK_MAX_TRIES
            outcome = "gave_up" if done else "failed"
            cursor.execute(
                SQL["mark_failed"],
                {
                    "id": delivery_id,
                    "code": code,
                    "error": error,
                    "outcome": outcome,
                    "status": (Status.FAILED if done else Status.PENDING).value,
                    "pending": Status.PENDING.value,
                    "delay": None if done else backoff(tries + 1),
                },
            )
        if cursor.rowcount != 1:  # pragma: no cover - the row is locked by this transaction
            raise RuntimeError(f"webhook delivery {delivery_id} changed under its lock")
        metrics.on_commit(lambda: metrics.WEBHOOKS.labels(event, outcome).inc())
    return delivery_id, outcome


def deliver_due() -> Delivered:
    """Deliver due rows until none is left, one fails, or RUNS_WEBHOOK_INTERVAL passed."""
    result = Delivered()
    deadline = time.monotonic() + float(settings.RUNS_WEBHOOK_INTERVAL)
    while time.monotonic() < deadline:
        done = deliver_one()
        if done is None:
            break
        delivery_id, outcome = done
        result.ids.append(delivery_id)
        if outcome == "delivered":
            result.delivered += 1
            continue
        if outcome == "gave_up":
            result.gave_up += 1
        else:
            result.failed += 1
        break  # the receiver is failing: leave the rest to the next interval
    return result


class NotFailed(Exception):
    """Only a delivery kept as failed can be sent again; names those that are not."""

    def __init__(self, refused: dict[int, str]) -> None:
        self.refused = refused
        described = ", ".join(f"{i} ({status})" for i, status in sorted(refused.items()))
        super().__init__(
            f"only a failed webhook delivery can be sent again, not {described}; "
            "nothing was changed"
        )


def resend(ids: list[int]) -> list[int]:
    """Make failed deliveries pending again, due now, with their tries back to zero (the
    receiver was fixed): all of them, or none if any is not failed."""
    with transaction.atomic(durable=True), connection.cursor() as cursor:
        cursor.execute(
            SQL["resend"],
            {"ids": ids, "pending": Status.PENDING.value, "failed": Status.FAILED.value},
        )
        changed = sorted(row[0] for row in cursor.fetchall())
        if changed != sorted(set(ids)):
            statuses = dict(WebhookDelivery.objects.filter(pk__in=ids).values_list("pk", "status"))
            refused = {i: statuses.get(i, "no such delivery") for i in ids if i not in changed}
            raise NotFailed(refused)  # rolls the update back
    return changed
