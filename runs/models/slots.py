"""Concurrency slots (docs/authoring.md#limits-and-holds): a row per slot in use of a
declared limit. The unique (scope, n) with 0 <= n < the limit's max is what holds a
limit, whatever two workers do at once; runs/engine/attempts/slots.py is its only
writer."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from .core import Attempt


class Slot(models.Model):
    """Slot `n` of a limit's `scope` (`step merge-change.merge change_id=301`, say),
    taken by an attempt in the transaction that starts it. It is in use while that
    attempt runs: the next start in the scope deletes it once the attempt has ended
    (lazily, so that ending an attempt writes nothing more)."""

    id = models.BigAutoField(primary_key=True)
    scope = models.TextField()
    n = models.IntegerField()
    attempt = models.ForeignKey(Attempt, on_delete=models.CASCADE, related_name="+", db_index=False)
    step_id = models.BigIntegerField()
    taken_at = models.DateTimeField()

    class Meta:
        ordering = ["scope", "n"]
        indexes = [models.Index(fields=["attempt"], name="slot_attempt_idx")]
        constraints = [
            models.UniqueConstraint(fields=["scope", "n"], name="slot_scope_n_unique"),
            models.CheckConstraint(condition=Q(n__gte=0), name="slot_n_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.scope} #{self.n}"


class RateClock(models.Model):
    """A rate's clock (docs/authoring.md#limits-and-holds): when the next start in
    `scope` may come. A start moves it on by the rate's interval, or puts the step off
    to the time it reserves; its row lock makes starts of one scope take turns for that
    one statement."""

    id = models.BigAutoField(primary_key=True)
    scope = models.TextField(unique=True)
    next_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.scope}: next start at {self.next_at}"
