"""What retention keeps and records: the policies (and who changed them), each purge,
and what stands in for the rows a purge removed (a run's history summary, a map's
compacted item registry). The stages themselves are runs/engine/policies/retention.py.
"""

from __future__ import annotations

from django.contrib.postgres.fields import ArrayField
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import Q
from django.db.models.functions import Now

from .core import Run, Step


class RunHistorySummary(models.Model):
    """What retention removed from a run's event log: how many events of each type, the
    seq range, and the projection (runs/record/history.py) of the removed events, so that
    verify_history checks what remains (later events, rows) against it instead of
    calling a compacted run broken. Written in the transaction that deletes the events;
    a purge cut into several transactions folds each part into it."""

    run = models.OneToOneField(
        Run, on_delete=models.CASCADE, primary_key=True, related_name="history_summary"
    )
    events_removed = models.PositiveIntegerField(default=0)
    counts = models.JSONField(default=dict)  # event type -> events removed
    first_seq = models.PositiveIntegerField()
    last_seq = models.PositiveIntegerField()
    projection = models.JSONField(default=dict)
    removed_at = models.DateTimeField(db_default=Now())

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(first_seq__lte=models.F("last_seq")), name="summary_seq_range"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.events_removed} events of run {self.run_id} removed"


class MapRegistry(models.Model):
    """A map step's compacted completed-item registry
    (docs/architecture.md#the-completed-item-registry). Items are numbered
    in plan order (batch_index * batch_size + position in the batch). Every item numbered
    below `watermark` has completed, except those listed in `exceptions` (item keys);
    items at or above it are still told by their claims. Retention moves the watermark
    forward and deletes the succeeded item claims it covers in the same transaction, so
    at every commit "completed" = covered by the watermark or holding a succeeded claim.
    """

    step = models.OneToOneField(
        Step, on_delete=models.CASCADE, primary_key=True, related_name="registry"
    )
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="registries")
    items = models.PositiveIntegerField()
    batch_size = models.PositiveIntegerField()
    watermark = models.PositiveIntegerField(default=0)
    exceptions = ArrayField(models.CharField(max_length=200), default=list, blank=True)
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["run"], name="mapregistry_run_idx")]
        constraints = [
            models.CheckConstraint(
                condition=Q(watermark__lte=models.F("items")), name="mapregistry_watermark_bounded"
            ),
            models.CheckConstraint(condition=Q(batch_size__gte=1), name="mapregistry_batch_size"),
        ]

    def __str__(self) -> str:
        return f"registry of step {self.step_id}: {self.watermark}/{self.items}"

    def covers(self, position: int, item_key: str) -> bool:
        return position < self.watermark and item_key not in self.exceptions


class RetentionPolicy(models.Model):
    """How long finished runs keep their payloads, their events and, for the dedup
    window, their claims and submission keys (docs/operating.md#retention). The policy with no
    workflow
    is the default; a policy naming a workflow overrides it for that workflow (disabled:
    that workflow is not purged at all)."""

    name = models.CharField(max_length=100, unique=True)
    workflow = models.CharField(
        max_length=100, blank=True, default="", help_text="Empty: the default policy."
    )
    enabled = models.BooleanField(default=True)
    payload_days = models.PositiveIntegerField(
        default=30,
        help_text="Days after a run finished before its inputs and results are compacted.",
    )
    event_days = models.PositiveIntegerField(
        default=90, help_text="Days after a run finished before its events are removed."
    )
    dedup_days = models.PositiveIntegerField(
        default=365,
        help_text="Days after a run finished before its claims and submission keys are "
        "removed: until then a duplicate effect or submission is still recognised.",
    )
    created_at = models.DateTimeField(db_default=Now())
    updated_at = models.DateTimeField(db_default=Now())

    class Meta:
        ordering = ["workflow", "name"]
        verbose_name_plural = "retention policies"
        constraints = [
            # one default (workflow "") and at most one override per workflow
            models.UniqueConstraint(
                fields=["workflow"],
                name="retentionpolicy_workflow_unique",
                violation_error_message="That workflow already has a policy (an empty "
                "workflow is the default policy, and there is one).",
            ),
            models.CheckConstraint(
                condition=Q(dedup_days__gte=models.F("event_days"))
                & Q(dedup_days__gte=models.F("payload_days")),
                name="retentionpolicy_dedup_longest",
                violation_error_message="The dedup window must be at least as long as the "
                "event and payload windows.",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.workflow or 'default'})"

    def clean(self) -> None:
        from django.conf import settings

        floor = int(settings.RUNS_RETENTION_MIN_DEDUP_DAYS)
        errors: list[str] = []
        if self.dedup_days is not None:
            if self.dedup_days < floor:
                errors.append(
                    f"The dedup window must be at least {floor} days "
                    "(RUNS_RETENTION_MIN_DEDUP_DAYS): a client or a redelivered message "
                    "retrying later than that would repeat an effect."
                )
            for field, what in (("event_days", "events"), ("payload_days", "payloads")):
                value = getattr(self, field)
                if value is not None and self.dedup_days < value:
                    errors.append(
                        f"The dedup window ({self.dedup_days} days) must be at least as long "
                        f"as the {what} window ({value} days): claims and submission keys are "
                        "what prevents a duplicate effect, and they must outlive the rest."
                    )
        if errors:
            raise ValidationError({"dedup_days": errors})

    def values(self) -> dict[str, object]:
        """The audited fields (RetentionPolicyChange)."""
        return {
            "name": self.name,
            "workflow": self.workflow,
            "enabled": self.enabled,
            "payload_days": self.payload_days,
            "event_days": self.event_days,
            "dedup_days": self.dedup_days,
        }


class RetentionPolicyChange(models.Model):
    """Who changed a retention policy, when, from what to what. Written in the
    transaction that changes the policy; kept when the policy is deleted."""

    policy = models.ForeignKey(
        RetentionPolicy, on_delete=models.SET_NULL, null=True, blank=True, related_name="changes"
    )
    policy_name = models.CharField(max_length=100)
    action = models.CharField(
        max_length=10,
        choices=[("created", "created"), ("changed", "changed"), ("deleted", "deleted")],
    )
    actor = models.CharField(max_length=150)
    at = models.DateTimeField(db_default=Now())
    old = models.JSONField(null=True, blank=True)
    new = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["-at", "-id"]

    def __str__(self) -> str:
        return f"{self.policy_name} {self.action} by {self.actor}"


class RetentionPurge(models.Model):
    """One purge of one policy (or its preview, dry_run): what it did, stage by stage."""

    policy = models.ForeignKey(
        RetentionPolicy, on_delete=models.SET_NULL, null=True, blank=True, related_name="purges"
    )
    policy_name = models.CharField(max_length=100)
    dry_run = models.BooleanField(default=False)
    started_at = models.DateTimeField(db_default=Now())
    finished_at = models.DateTimeField(null=True, blank=True)
    # stage -> {"runs": n, "rows": n, ...}; see runs/engine/policies/retention.py
    counts = models.JSONField(default=dict)
    batches = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"purge of {self.policy_name} at {self.started_at}"

    @property
    def duration(self) -> float | None:
        if self.finished_at is None or self.started_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()
