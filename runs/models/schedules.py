"""Schedules: a workflow submitted at every tick of a cron expression."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from ..workflows import registry


class Schedule(models.Model):
    """Submit a run of a workflow at every tick of a cron expression. Declared in
    code (`wf.schedule(...)`, synced into this table) or edited in the admin. The beat
    task (runs/engine/policies/schedules.py) submits each tick with the submission key
    `schedule:<name>:<tick>`, so a tick yields one run however many beats fire it."""

    class Missed(models.TextChoices):
        SKIP = "skip", "skip: submit only the latest missed tick"
        CATCH_UP = "catch_up", "catch up: submit every missed tick (up to the bound)"

    name = models.CharField(max_length=100, unique=True)
    workflow = models.CharField(max_length=100)
    # None: the latest version the beat's process knows when the tick fires.
    version = models.PositiveIntegerField(null=True, blank=True)
    cron = models.CharField(
        max_length=100,
        help_text="Five fields (minute hour day month weekday), or six with seconds last.",
    )
    timezone = models.CharField(max_length=64, default="UTC")
    input = models.JSONField(default=dict, blank=True)
    missed = models.CharField(max_length=16, choices=Missed.choices, default=Missed.SKIP)
    max_catch_up = models.PositiveIntegerField(
        default=100, help_text="Catch up: at most this many of the latest missed ticks."
    )
    enabled = models.BooleanField(default=True)
    # Declared in code: the code owns cron, input and policy; the admin may pause it.
    declared_in_code = models.BooleanField(default=False, editable=False)
    # The first tick not yet submitted; the beat submits every tick up to now().
    next_tick_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_tick_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_run_id = models.UUIDField(null=True, blank=True, editable=False)
    skipped_ticks = models.PositiveBigIntegerField(default=0, editable=False)
    # Why the last due tick could not be submitted (kept due until it can).
    last_error = models.TextField(blank=True, default="", editable=False)
    created_at = models.DateTimeField(db_default=Now(), editable=False)
    updated_at = models.DateTimeField(db_default=Now(), editable=False)
    # Who made and changed it in the admin (`user:<username>`; empty: declared in code,
    # or made before they were recorded). Its runs carry them (Run.on_behalf_of), and
    # none of them may approve those runs: separation of duties (docs/api.md#principals).
    created_by = models.CharField(max_length=160, blank=True, db_default="", editable=False)
    changed_by = models.CharField(max_length=160, blank=True, db_default="", editable=False)
    # Who last set what it submits (workflow, version, input): changed_by moves on with
    # a later change of the cron alone, and this person must still not approve.
    input_set_by = models.CharField(max_length=160, blank=True, db_default="", editable=False)

    class Meta:
        ordering = ["name"]
        indexes = [
            # The beat's query: enabled schedules whose next tick is due.
            models.Index(
                fields=["next_tick_at"], name="schedule_due_idx", condition=Q(enabled=True)
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(missed__in=["skip", "catch_up"]), name="schedule_missed_valid"
            ),
            models.CheckConstraint(condition=Q(max_catch_up__gte=1), name="schedule_catch_up_min"),
            models.CheckConstraint(
                condition=Q(name__regex=r"^[A-Za-z0-9._-]+$"), name="schedule_name_chars"
            ),
        ]

    def __str__(self) -> str:
        return f"schedule {self.name} ({self.cron}) -> {self.workflow}"

    def people(self) -> tuple[str, ...]:
        """Everyone answerable for what it submits (Principal.schedule's on_behalf_of)."""
        people = (self.created_by, self.changed_by, self.input_set_by)
        return tuple(sorted({p for p in people if p}))

    def clean(self) -> None:
        problems = registry.check_schedule_row(self)
        if problems:
            raise ValidationError(problems)
