"""Pauses (docs/operating.md#pause-and-resume): an operator stops new attempts of a
workflow, or of one step name of it, from starting. Keyed by the workflow's name, so a
pause holds every version. The start statement (runs/engine/attempts/start.sql) reads
this table; the engine's policies/pauses.py is its only writer."""

from __future__ import annotations

from django.db import models
from django.db.models import Q
from django.db.models.functions import Now


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

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["-at", "-id"], name="pausechange_at_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(action__in=["pause", "resume"]), name="pausechange_action_valid"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.workflow}{'/' + self.step if self.step else ''}"
