"""Operator coordination around unresolved claims.

A take says "I am on it": one row per claim, so two operators do not investigate the
same claim at once. It is advisory (resolving does not require it) and short-lived:
it expires on its own after settings.RECONCILIATION_TAKE_MINUTES and is removed when
the claim is resolved through reconciliation.services. Who holds a claim is decided
by the database (INSERT … ON CONFLICT on the primary key), never by a read in Python.
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
