"""What every override of a declaration shares (docs/operating.md#concurrency-limits,
docs/operating.md#breakers): the setting says why it is overridden and when it last
changed; its audit row says who did what, with the old and new values. Constraint names
carry the model's own name (`%(class)s`), as each table had them when it was added."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now


class Override(models.Model):
    """An operator's override of something a workflow declares, edited in the admin at
    run time (runs/admin.py writes its audit row in the same transaction)."""

    reason = models.TextField(help_text="Why it is overridden (kept in the audit).")
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        abstract = True
        constraints = [
            models.CheckConstraint(condition=~Q(reason=""), name="%(class)s_reason"),
        ]

    def values(self) -> dict[str, object]:
        """What the audit keeps of it: every field an operator edits."""
        raise NotImplementedError


class OverrideChange(models.Model):
    """Append-only audit of one kind of override: who, when, old and new values."""

    action = models.CharField(max_length=8)  # created, changed, deleted
    actor = models.CharField(max_length=150)
    old = models.JSONField(null=True, blank=True)
    new = models.JSONField(null=True, blank=True)
    at = models.DateTimeField(db_default=Now())

    class Meta:
        abstract = True
        ordering = ["-at", "-id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=["created", "changed", "deleted"]),
                name="%(class)s_action_valid",
            ),
        ]
