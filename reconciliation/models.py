"""Operator coordination around unresolved claims.

A take says "I am on it": one row per claim, so two operators do not investigate the
same claim at once. It is advisory (resolving does not require it) and short-lived:
it expires on its own after settings.RECONCILIATION_TAKE_MINUTES and is removed when
the claim is resolved, by whoever (an operator, a probe, a script), in the
resolution's transaction (the engine's claim_resolved; reconciliation/apps.py). Who
holds a claim is decided by the database (INSERT … ON CONFLICT on the primary key),
never by a read in Python.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.db.models.functions import Now


class ClaimTake(models.Model):
    claim = models.OneToOneField(
        "runs.Claim", on_delete=models.CASCADE, primary_key=True, related_name="take"
    )
    taken_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="claim_takes"
    )
    # Since when this operator has held it (a renewal keeps it); both on the
    # database's clock.
    taken_at = models.DateTimeField(db_default=Now())
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(expires_at__gt=F("taken_at")), name="claimtake_expires_after_taken"
            ),
        ]

    def __str__(self) -> str:
        return f"claim {self.claim_id} taken by {self.taken_by_id} until {self.expires_at}"


class WebhookDelivery(models.Model):
    """The webhook's outbox (docs/operating.md#webhook): one row per event, written by
    the periodic scan (reconciliation/webhooks.py) in its own transaction, never in a
    step's, and delivered from here by whoever holds the row (FOR UPDATE SKIP LOCKED).
    UNIQUE(claim_id, event) makes each event enqueued once however often and however
    many beats scan. The claim is named by id, not by a foreign key: retention deletes
    claims after their dedup window, and what was sent stays (its payload is a copy)."""

    class Event(models.TextChoices):
        CLAIM_UNRESOLVED = "claim_unresolved"
        CLAIM_STALE = "claim_stale"  # older than RECONCILIATION_STALE_MINUTES
        # The engine's breaker paused a step (a PauseChange with its counts); once per pause.
        STEP_PAUSED_BY_BREAKER = "step_paused_by_breaker"

    class Status(models.TextChoices):
        PENDING = "pending"  # due at next_attempt_at
        DELIVERED = "delivered"  # the receiver answered 2xx
        FAILED = "failed"  # RUNS_WEBHOOK_MAX_TRIES used up; kept, visible

    event = models.CharField(max_length=32, choices=Event.choices)
    # What the event is about: a claim (claim_unresolved, claim_stale) or a pause
    # (step_paused_by_breaker), the other null; by id, never a foreign key.
    claim_id = models.BigIntegerField(null=True, blank=True)
    pause_id = models.BigIntegerField(null=True, blank=True)
    payload = models.JSONField()
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.PENDING)
    tries = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(db_default=Now())
    created_at = models.DateTimeField(db_default=Now())
    delivered_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    # Every try: {"try", "at", "outcome", "status_code", "error", "next_attempt_at"}.
    history = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        constraints = [
            models.UniqueConstraint(
                fields=["claim_id", "event"], name="webhookdelivery_once_per_claim"
            ),
            # Nulls are distinct: a claim's rows never meet a pause's here.
            models.UniqueConstraint(
                fields=["pause_id", "event"], name="webhookdelivery_once_per_pause"
            ),
            models.CheckConstraint(
                condition=Q(
                    event__in=["claim_unresolved", "claim_stale"],
                    claim_id__isnull=False,
                    pause_id__isnull=True,
                )
                | Q(event="step_paused_by_breaker", claim_id__isnull=True, pause_id__isnull=False),
                name="webhookdelivery_subject",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["pending", "delivered", "failed"]),
                name="webhookdelivery_status_valid",
            ),
            models.CheckConstraint(
                condition=Q(
                    event__in=["claim_unresolved", "claim_stale", "step_paused_by_breaker"]
                ),
                name="webhookdelivery_event_valid",
            ),
            models.CheckConstraint(
                condition=Q(status="delivered", delivered_at__isnull=False)
                | (~Q(status="delivered") & Q(delivered_at__isnull=True)),
                name="webhookdelivery_delivered_at",
            ),
        ]
        indexes = [
            # what is due, oldest first; and /metrics' count and age of what is pending
            models.Index(
                fields=["next_attempt_at", "id"],
                name="webhook_pending_idx",
                condition=Q(status="pending"),
            ),
        ]

    def __str__(self) -> str:
        about = f"claim {self.claim_id}" if self.claim_id is not None else f"pause {self.pause_id}"
        return f"{self.event} of {about}: {self.status}"
