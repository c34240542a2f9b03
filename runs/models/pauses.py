"""Pauses (docs/operating.md#pause-and-resume): an operator stops new attempts of a
workflow, or of one step name of it, from starting. Keyed by the workflow's name, so a
pause holds every version. The start statement (runs/engine/attempts/start.sql) reads
this table; the engine's policies/pauses.py is its only writer."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from .overrides import Override, OverrideChange


class Pause(models.Model):
    """One active pause. `step` is a step's definition name (a map step's batches share
    it), or '' for the whole workflow. Resuming deletes the row; PauseChange keeps the
    record."""

    workflow = models.CharField(max_length=100)
    step = models.CharField(max_length=100, blank=True, default="")
    actor = models.CharField(max_length=150)
    reason = models.TextField()
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        ordering = ["workflow", "step"]
        constraints = [
            # One pause per (workflow, step): the start's probe is this index, and pausing
            # twice is refused by it (INSERT ... ON CONFLICT), never checked first.
            models.UniqueConstraint(fields=["workflow", "step"], name="pause_workflow_step_unique"),
            models.CheckConstraint(condition=~Q(reason=""), name="pause_reason_required"),
        ]

    def __str__(self) -> str:
        return f"pause of {self.workflow}{'/' + self.step if self.step else ''}"


class PauseChange(models.Model):
    """Append-only audit of pauses and resumes: who, when, why. Written in the same
    transaction as the Pause row it records."""

    class Action(models.TextChoices):
        PAUSE = "pause", "paused"
        RESUME = "resume", "resumed"

    action = models.CharField(max_length=8, choices=Action.choices)
    workflow = models.CharField(max_length=100)
    step = models.CharField(max_length=100, blank=True, default="")
    actor = models.CharField(max_length=150)
    reason = models.TextField()
    # Resume: how many waiting steps it republished.
    republished = models.PositiveIntegerField(default=0)
    at = models.DateTimeField(db_default=Now())
    # The Pause row it made or ended (its id outlives it: a resume deletes the row).
    # Null on rows written before migration 0034.
    pause_id = models.BigIntegerField(null=True, blank=True)
    # A pause the engine's breaker made (runs/engine/policies/breaker.py): the counts it
    # tripped on, {"outcomes", "threshold", "within_seconds"}; null for a person's pause
    # and every resume. The webhook announces the rows that have it, once per pause.
    breaker = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [
            models.Index(fields=["-at", "-id"], name="pausechange_at_idx"),
            # The breaker's count starts after the step's last resume; the webhook's scan
            # reads the breaker's pauses: both few rows of a small table, by index.
            models.Index(
                fields=["workflow", "step", "-at"],
                name="pausechange_resume_idx",
                condition=Q(action="resume"),
            ),
            models.Index(
                fields=["pause_id"],
                name="pausechange_breaker_idx",
                condition=Q(breaker__isnull=False),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=["pause", "resume"]), name="pausechange_action_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.workflow}{'/' + self.step if self.step else ''}"


class BreakerSetting(Override):
    """An operator's override of one step's declared breaker (docs/operating.md#breakers),
    edited in the admin at run time: its threshold and window, or off. Only a step that
    declares a breaker has one to override: the engine reads this table only after an
    outcome of such a step, so a step without a breaker costs no statement. Every change
    writes a BreakerChange in the admin's transaction."""

    workflow = models.CharField(max_length=100)
    step = models.CharField(max_length=100)
    enabled = models.BooleanField(
        default=True, help_text="Off: the breaker never trips, whatever the step declares."
    )
    outcomes = models.PositiveIntegerField(
        help_text="Failed or unknown outcomes within the window that pause the step (>= 1)."
    )
    within_seconds = models.FloatField(help_text="The window, in seconds (> 0).")

    class Meta(Override.Meta):
        ordering = ["workflow", "step"]
        constraints = [
            *Override.Meta.constraints,
            models.UniqueConstraint(fields=["workflow", "step"], name="breakersetting_unique"),
            models.CheckConstraint(condition=Q(outcomes__gte=1), name="breakersetting_outcomes"),
            models.CheckConstraint(
                condition=Q(within_seconds__gt=0), name="breakersetting_within_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"breaker of {self.workflow}/{self.step}"

    def values(self) -> dict[str, object]:
        return {
            "enabled": self.enabled,
            "outcomes": self.outcomes,
            "within_seconds": self.within_seconds,
            "reason": self.reason,
        }


class BreakerChange(OverrideChange):
    """Append-only audit of the breaker overrides."""

    workflow = models.CharField(max_length=100)
    step = models.CharField(max_length=100)

    def __str__(self) -> str:
        return f"{self.action} breaker of {self.workflow}/{self.step}"
