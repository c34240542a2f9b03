"""The reconciliation app's Celery task: the webhook (docs/operating.md#webhook)."""

from __future__ import annotations

from celery import shared_task

from . import webhooks


@shared_task(name="reconciliation.webhooks", acks_late=True)
def send_webhooks() -> str:
    """Beat's periodic pass (RUNS_WEBHOOK_INTERVAL, only with RUNS_WEBHOOK_URL set):
    enqueue new events, then deliver what is due. A duplicate delivery of this message
    is harmless: the outbox's unique key and its row locks decide."""
    if not webhooks.enabled():
        return "webhook off (RUNS_WEBHOOK_URL unset)"
    enqueued = webhooks.enqueue_events()
    return f"{enqueued} enqueued; {webhooks.deliver_due().line()}"
