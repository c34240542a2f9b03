"""Concurrency slots (docs/authoring.md#limits-and-holds): a row per slot in use of a
declared limit. The unique (scope, n) with 0 <= n < the limit's max is what holds a
limit, whatever two workers do at once; runs/engine/attempts/slots.py is its only
writer."""

from __future__ import annotations

from django.db import models
from django.db.models import Q

from .core import Attempt
from .overrides import Override, OverrideChange


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


class LimitSetting(Override):
    """An operator's override of one declared concurrency limit's max
    (docs/operating.md#concurrency-limits), edited in the admin at run time: the limit
    of a workflow (`step` '') or of a step, with or without `per`. The start of an attempt
    of a limited step reads it in the statement that takes its slot; a step without a
    limit never reads it. Every change writes a LimitChange in the admin's transaction."""

    workflow = models.CharField(max_length=100)
    step = models.CharField(
        max_length=100, blank=True, default="", help_text="Empty: the workflow's own limit."
    )
    per = models.CharField(
        max_length=100, blank=True, default="", help_text="The limit's per= field; empty: none."
    )
    max = models.PositiveIntegerField(help_text="At most this many attempts at once (>= 1).")

    class Meta(Override.Meta):
        ordering = ["workflow", "step", "per"]
        constraints = [
            *Override.Meta.constraints,
            models.UniqueConstraint(fields=["workflow", "step", "per"], name="limitsetting_unique"),
            models.CheckConstraint(condition=Q(max__gte=1), name="limitsetting_max_positive"),
        ]

    def __str__(self) -> str:
        what = f"{self.workflow}.{self.step}" if self.step else self.workflow
        return f"limit of {what}" + (f" per {self.per}" if self.per else "")

    def values(self) -> dict[str, object]:
        return {"max": self.max, "reason": self.reason}


class LimitChange(OverrideChange):
    """Append-only audit of the limit overrides."""

    workflow = models.CharField(max_length=100)
    step = models.CharField(max_length=100, blank=True, default="")
    per = models.CharField(max_length=100, blank=True, default="")

    def __str__(self) -> str:
        return f"{self.action} limit of {self.workflow}.{self.step} per {self.per or '-'}"


class RateSetting(Override):
    """An operator's override of one declared rate (docs/operating.md#concurrency-limits),
    edited in the admin at run time: `starts` every `every_seconds`, for the rate of a
    workflow (`step` '') or of a step, with or without `per`. A start under the rate
    reads it in the statement that takes its turn. Every change writes a RateChange."""

    workflow = models.CharField(max_length=100)
    step = models.CharField(
        max_length=100, blank=True, default="", help_text="Empty: the workflow's own rate."
    )
    per = models.CharField(
        max_length=100, blank=True, default="", help_text="The rate's per= field; empty: none."
    )
    starts = models.PositiveIntegerField(help_text="At most this many starts (>= 1) …")
    every_seconds = models.FloatField(help_text="… every this many seconds (> 0).")

    class Meta(Override.Meta):
        ordering = ["workflow", "step", "per"]
        constraints = [
            *Override.Meta.constraints,
            models.UniqueConstraint(fields=["workflow", "step", "per"], name="ratesetting_unique"),
            models.CheckConstraint(condition=Q(starts__gte=1), name="ratesetting_starts_positive"),
            models.CheckConstraint(
                condition=Q(every_seconds__gt=0), name="ratesetting_every_positive"
            ),
        ]

    def __str__(self) -> str:
        what = f"{self.workflow}.{self.step}" if self.step else self.workflow
        return f"rate of {what}" + (f" per {self.per}" if self.per else "")

    def values(self) -> dict[str, object]:
        return {"starts": self.starts, "every_seconds": self.every_seconds, "reason": self.reason}


class RateChange(OverrideChange):
    """Append-only audit of the rate overrides."""

    workflow = models.CharField(max_length=100)
    step = models.CharField(max_length=100, blank=True, default="")
    per = models.CharField(max_length=100, blank=True, default="")

    def __str__(self) -> str:
        return f"{self.action} rate of {self.workflow}.{self.step} per {self.per or '-'}"
