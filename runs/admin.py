"""The admin (/admin/) is where retention policies, schedules and breaker overrides
are edited (docs/operating.md#retention, docs/operating.md#breakers). Operators
use it through their group's permissions (migration 0013), without being superusers.

Every change to a policy writes a RetentionPolicyChange (who, when, old and new values)
in the admin's own transaction, so a change is never saved without its audit row.
The last purges and a "preview" action (what a purge would touch now, computed by the
same code as `apply_retention --dry-run`) sit next to the policies.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db import transaction
from django.db.models import QuerySet
from django.db.models.functions import Now
from django.http import HttpRequest
from django.utils.html import format_html, format_html_join

from runs import engine
from runs.engine import retention
from runs.models import (
    BreakerChange,
    BreakerSetting,
    LimitChange,
    LimitSetting,
    RateChange,
    RateSetting,
    RetentionPolicy,
    RetentionPolicyChange,
    RetentionPurge,
    Schedule,
)
from runs.principals import user_principal
from runs.workflows import registry

RECENT_PURGES = 10


def _audit(
    request: HttpRequest, policy: RetentionPolicy, action: str, old: dict[str, Any] | None
) -> None:
    RetentionPolicyChange.objects.create(
        policy=None if action == "deleted" else policy,
        policy_name=policy.name,
        action=action,
        actor=request.user.get_username(),
        old=old,
        new=None if action == "deleted" else policy.values(),
    )


class ChangeInline(admin.TabularInline[RetentionPolicyChange, RetentionPolicy]):
    model = RetentionPolicyChange
    fk_name = "policy"
    extra = 0
    can_delete = False
    fields = readonly_fields = ("at", "actor", "action", "old", "new")
    ordering = ("-at", "-id")
    verbose_name_plural = "changes (audit)"

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


class RetentionPolicyForm(forms.ModelForm[RetentionPolicy]):
    """A policy names a registered workflow, or none (the default policy). Only a new
    or changed name is checked: a policy kept for a workflow no longer deployed (its
    runs still age) stays editable."""

    class Meta:
        model = RetentionPolicy
        fields = ("name", "workflow", "enabled", "payload_days", "event_days", "dedup_days")

    def clean_workflow(self) -> str:
        workflow: str = (self.cleaned_data.get("workflow") or "").strip()
        if not workflow or workflow == self.instance.workflow:
            return workflow
        problem = registry.why_unknown(workflow)
        if problem:
            # A policy for a name no run has would govern nothing, silently.
            raise forms.ValidationError(
                f"{problem}. Leave it empty for the default policy, which governs every "
                "workflow without a policy of its own."
            )
        return workflow


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(admin.ModelAdmin[RetentionPolicy]):
    form = RetentionPolicyForm
    list_display = (
        "name",
        "scope",
        "enabled",
        "payload_days",
        "event_days",
        "dedup_days",
        "last_purge",
    )
    list_filter = ("enabled",)
    fields = ("name", "workflow", "enabled", "payload_days", "event_days", "dedup_days")
    readonly_fields = ("recent_purges",)
    inlines = (ChangeInline,)
    actions = ("preview",)

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.fields + (("recent_purges",) if obj is not None else ())

    @admin.display(description="recent purges")
    def recent_purges(self, obj: RetentionPolicy) -> str:
        rows = obj.purges.order_by("-started_at", "-id")[:RECENT_PURGES]
        if not rows:
            return "none yet"
        return format_html(
            "<table><thead><tr><th>started</th><th>kind</th><th>duration (s)</th>"
            "<th>batches</th><th>counts</th></tr></thead><tbody>{}</tbody></table>",
            format_html_join(
                "",
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                (
                    (
                        f"{p.started_at:%Y-%m-%d %H:%M:%S}",
                        "preview" if p.dry_run else "purge",
                        "unfinished" if p.duration is None else f"{p.duration:.2f}",
                        p.batches,
                        "; ".join(
                            f"{stage}: " + ", ".join(f"{k} {v}" for k, v in c.items())
                            for stage, c in p.counts.items()
                        ),
                    )
                    for p in rows
                ),
            ),
        )

    @admin.display(description="applies to")
    def scope(self, obj: RetentionPolicy) -> str:
        return obj.workflow or "every workflow without its own policy"

    @admin.display(description="last purge")
    def last_purge(self, obj: RetentionPolicy) -> str:
        last = obj.purges.filter(dry_run=False).order_by("-started_at", "-id").first()
        if last is None:
            return "never"
        state = "finished" if last.finished_at else "not finished (running or killed)"
        total = sum(v for stage in last.counts.values() for v in stage.values())
        return f"{last.started_at:%Y-%m-%d %H:%M} {state}, {total} counted"

    def save_model(
        self, request: HttpRequest, obj: RetentionPolicy, form: Any, change: bool
    ) -> None:
        old = None
        if change:
            before = RetentionPolicy.objects.select_for_update().get(pk=obj.pk)
            old = before.values()
            obj.updated_at = Now()
        super().save_model(request, obj, form, change)
        obj.refresh_from_db()
        _audit(request, obj, "changed" if change else "created", old)

    def delete_model(self, request: HttpRequest, obj: RetentionPolicy) -> None:
        with transaction.atomic():
            _audit(request, obj, "deleted", obj.values())
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[RetentionPolicy]) -> None:
        with transaction.atomic():
            for obj in queryset.select_for_update():
                _audit(request, obj, "deleted", obj.values())
            super().delete_queryset(request, queryset)

    @admin.action(
        description="Preview: what a purge would touch now (changes nothing)",
        permissions=["change"],
    )
    def preview(self, request: HttpRequest, queryset: QuerySet[RetentionPolicy]) -> None:
        for policy in queryset.order_by("workflow", "name"):
            result = retention.preview(policy=policy)
            self.message_user(request, result.line(), messages.INFO)


@admin.register(RetentionPolicyChange)
class RetentionPolicyChangeAdmin(admin.ModelAdmin[RetentionPolicyChange]):
    list_display = ("at", "policy_name", "action", "actor", "old", "new")
    list_filter = ("action",)
    search_fields = ("policy_name", "actor")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(RetentionPurge)
class RetentionPurgeAdmin(admin.ModelAdmin[RetentionPurge]):
    list_display = (
        "started_at",
        "policy_name",
        "dry_run",
        "finished_at",
        "seconds",
        "batches",
        "counts",
    )
    list_filter = ("dry_run", "policy_name")

    @admin.display(description="duration (s)")
    def seconds(self, obj: RetentionPurge) -> str:
        return "-" if obj.duration is None else f"{obj.duration:.2f}"

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


# What the code owns for a schedule declared with wf.schedule(...).
CODE_OWNED = ("name", "workflow", "version", "cron", "timezone", "input", "missed", "max_catch_up")


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin[Schedule]):
    """Schedules: a row per schedule; those declared in code can only be paused
    here. Saving a new schedule, a changed cron or time zone, or one enabled again
    starts it at its next tick (runs/engine/policies/schedules.py)."""

    list_display = (
        "name",
        "workflow",
        "cron",
        "timezone",
        "missed",
        "enabled",
        "next_tick_at",
        "last_tick_at",
        "skipped_ticks",
        "has_error",
        "declared_in_code",
    )
    list_filter = ("enabled", "declared_in_code", "workflow")
    search_fields = ("name", "workflow")
    readonly_fields = (
        "declared_in_code",
        "next_tick_at",
        "last_tick_at",
        "last_run_id",
        "skipped_ticks",
        "last_error",
        "created_at",
        "created_by",
        "updated_at",
        "changed_by",
        "input_set_by",
    )

    @admin.display(boolean=True, description="error")
    def has_error(self, obj: Schedule) -> bool:
        return bool(obj.last_error)

    def get_readonly_fields(self, request: HttpRequest, obj: Schedule | None = None) -> Any:
        if obj is None:
            return ()  # adding: nothing has happened to it yet (see get_fields)
        if obj.declared_in_code:
            return (*CODE_OWNED, *self.readonly_fields)
        return self.readonly_fields

    def get_fields(self, request: HttpRequest, obj: Schedule | None = None) -> Any:
        """Adding, the form has only what a person fills in: the beat's columns mean
        nothing yet, and the database's defaults (created_at) would be shown as Python
        objects ("<DatabaseDefault object at 0x…>")."""
        fields = super().get_fields(request, obj)
        if obj is None:
            return [f for f in fields if f not in self.readonly_fields]
        return fields

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        by = user_principal(request.user.get_username())
        if not change:
            engine.prepare_for_save(obj, None, by=by)
            super().save_model(request, obj, form, change)
            return
        with transaction.atomic():
            # `obj` was loaded before the form was checked, and the beat may have fired
            # the schedule since (it advances the row under the row's lock): lock the row,
            # decide from its current version, and write only what the form edits (and
            # a restart's next tick), never the beat's columns as they were loaded.
            previous = Schedule.objects.select_for_update().get(pk=obj.pk)
            editable = {f.name for f in Schedule._meta.concrete_fields if f.editable}
            fields = [name for name in form.fields if name in editable]
            fields += engine.prepare_for_save(obj, previous, by=by)
            obj.updated_at = Now()
            obj.save(update_fields=[*fields, "updated_at"])
        obj.refresh_from_db()


class OverrideAdmin(admin.ModelAdmin[Any]):
    """An override of something a workflow declares (a limit, a rate, a breaker), edited
    at run time: each save and delete writes its audit row (`audit_model`: who, when, old
    and new values) in the admin's own transaction, so no change is saved without it. The
    fields that name what is overridden (`key_fields`) are fixed once it exists."""

    audit_model: type[Any]
    key_fields: tuple[str, ...] = ("workflow", "step", "per")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.key_fields if obj is not None else ()

    def _audit(
        self, request: HttpRequest, obj: Any, action: str, old: dict[str, Any] | None
    ) -> None:
        self.audit_model.objects.create(
            **{name: getattr(obj, name) for name in self.key_fields},
            action=action,
            actor=request.user.get_username(),
            old=old,
            new=None if action == "deleted" else obj.values(),
        )

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        with transaction.atomic():
            old = None
            if change:
                old = type(obj).objects.select_for_update().get(pk=obj.pk).values()
                obj.updated_at = Now()
            super().save_model(request, obj, form, change)
            obj.refresh_from_db()
            self._audit(request, obj, "changed" if change else "created", old)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        with transaction.atomic():
            self._audit(request, obj, "deleted", obj.values())
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        with transaction.atomic():
            for obj in queryset.select_for_update():
                self._audit(request, obj, "deleted", obj.values())
            super().delete_queryset(request, queryset)


class AuditAdmin(admin.ModelAdmin[Any]):
    """An override's audit: read-only, for everyone who may see it."""

    list_filter = ("action",)
    search_fields = ("workflow", "step", "actor")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def declared(workflow: str, kind: str) -> list[tuple[str, str]]:
    """What some version of `workflow` declares of `kind` ("limit", "rate" or "breaker"),
    as (step, per): step '' for the workflow's own, per '' for one without a key."""
    found: set[tuple[str, str]] = set()
    for version in registry.versions(workflow):
        wf = registry.get(workflow, version)
        if wf is None:
            continue
        if kind == "limit":
            if wf.limit is not None:
                found.add(("", wf.limit.per or ""))
            for s in wf.steps.values():
                found.update((s.name, one.per or "") for one in s.limits)
        elif kind == "rate":
            if wf.rate is not None:
                found.add(("", wf.rate.per or ""))
            found.update((s.name, s.rate.per or "") for s in wf.steps.values() if s.rate)
        else:
            found.update((s.name, "") for s in wf.steps.values() if s.breaker is not None)
    return sorted(found)


class OverrideForm(forms.ModelForm[Any]):
    """Only what a workflow declares can be overridden (the engine reads an override
    where it applies the declaration: docs/operating.md#concurrency-limits,
    docs/operating.md#breakers); declaring one is a deploy. `kind` names it; the fields
    in `whole` must be at least 1, those in `seconds` more than 0."""

    kind: str
    whole: tuple[str, ...] = ()
    seconds: tuple[str, ...] = ()

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        workflow = data.get("workflow", "")
        step, per = data.get("step", "") or "", data.get("per", "") or ""
        for name in self.whole:
            if data.get(name) is not None and data[name] < 1:
                self.add_error(name, "at least 1")
        for name in self.seconds:
            if data.get(name) is not None and not data[name] > 0:
                self.add_error(name, "a positive number of seconds")
        if not workflow:
            return data
        if not registry.versions(workflow):
            self.add_error("workflow", f"no workflow named {workflow!r} is registered")
            return data
        found = declared(workflow, self.kind)
        if (step, per) not in found:
            said = "; ".join(
                f"step {s or '(the workflow)'}" + (f" per {p}" if p else "") for s, p in found
            )
            self.add_error(
                "step",
                f"workflow {workflow!r} declares no {self.kind} on "
                f"{('step ' + repr(step)) if step else 'the workflow itself'}"
                + (f" per {per!r}" if per else "")
                + (f"; its {self.kind}s: {said}" if found else "; it declares none")
                + f". An override changes a declared {self.kind}; declaring one is a deploy.",
            )
        return data


class BreakerSettingForm(OverrideForm):
    kind, whole, seconds = "breaker", ("outcomes",), ("within_seconds",)

    class Meta:
        model = BreakerSetting
        fields = ("workflow", "step", "enabled", "outcomes", "within_seconds", "reason")


@admin.register(BreakerSetting)
class BreakerSettingAdmin(OverrideAdmin):
    """Breaker overrides: a step's threshold and window, or off, at run time."""

    form = BreakerSettingForm
    audit_model = BreakerChange
    key_fields = ("workflow", "step")
    list_display = ("workflow", "step", "enabled", "outcomes", "within_seconds", "updated_at")
    list_filter = ("enabled",)
    search_fields = ("workflow", "step")


@admin.register(BreakerChange)
class BreakerChangeAdmin(AuditAdmin):
    list_display = ("at", "workflow", "step", "action", "actor", "old", "new")


class LimitSettingForm(OverrideForm):
    kind, whole = "limit", ("max",)

    class Meta:
        model = LimitSetting
        fields = ("workflow", "step", "per", "max", "reason")


@admin.register(LimitSetting)
class LimitSettingAdmin(OverrideAdmin):
    """Concurrency limit overrides: a declared limit's max at run time."""

    form = LimitSettingForm
    audit_model = LimitChange
    list_display = ("workflow", "step", "per", "max", "updated_at")
    search_fields = ("workflow", "step")


@admin.register(LimitChange)
class LimitChangeAdmin(AuditAdmin):
    list_display = ("at", "workflow", "step", "per", "action", "actor", "old", "new")


class RateSettingForm(OverrideForm):
    kind, whole, seconds = "rate", ("starts",), ("every_seconds",)

    class Meta:
        model = RateSetting
        fields = ("workflow", "step", "per", "starts", "every_seconds", "reason")


@admin.register(RateSetting)
class RateSettingAdmin(OverrideAdmin):
    """Rate overrides: a declared rate's starts per interval at run time."""

    form = RateSettingForm
    audit_model = RateChange
    list_display = ("workflow", "step", "per", "starts", "every_seconds", "updated_at")
    search_fields = ("workflow", "step")


@admin.register(RateChange)
class RateChangeAdmin(AuditAdmin):
    list_display = ("at", "workflow", "step", "per", "action", "actor", "old", "new")
