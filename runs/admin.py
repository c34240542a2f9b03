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


@admin.register(RetentionPolicy)
class RetentionPolicyAdmin(admin.ModelAdmin[RetentionPolicy]):
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


class BreakerSettingForm(forms.ModelForm[BreakerSetting]):
    """Only a step that declares a breaker (in some version of its workflow) can have
    its breaker overridden: the engine reads the override after an outcome of such a
    step only (docs/operating.md#breakers)."""

    class Meta:
        model = BreakerSetting
        fields = ("workflow", "step", "enabled", "outcomes", "within_seconds", "reason")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        workflow, step = data.get("workflow", ""), data.get("step", "")
        if workflow and step:
            declared = [
                s.name
                for version in registry.versions(workflow)
                if (wf := registry.get(workflow, version)) is not None
                for s in wf.steps.values()
                if s.breaker is not None
            ]
            if step not in declared:
                raise forms.ValidationError(
                    f"no version of workflow {workflow!r} declares a breaker on step {step!r}"
                    + (f"; steps with one: {', '.join(sorted(set(declared)))}" if declared else "")
                    + ". An override changes a declared breaker; declaring one is a deploy."
                )
        if data.get("outcomes") is not None and data["outcomes"] < 1:
            self.add_error("outcomes", "at least 1")
        if data.get("within_seconds") is not None and not data["within_seconds"] > 0:
            self.add_error("within_seconds", "a positive number of seconds")
        return data


def _breaker_audit(
    request: HttpRequest, obj: BreakerSetting, action: str, old: dict[str, Any] | None
) -> None:
    BreakerChange.objects.create(
        workflow=obj.workflow,
        step=obj.step,
        action=action,
        actor=request.user.get_username(),
        old=old,
        new=None if action == "deleted" else obj.values(),
    )


@admin.register(BreakerSetting)
class BreakerSettingAdmin(admin.ModelAdmin[BreakerSetting]):
    """Breaker overrides: a step's threshold and window, or off, at run time; each
    change audited (BreakerChange) in the admin's own transaction."""

    form = BreakerSettingForm
    list_display = ("workflow", "step", "enabled", "outcomes", "within_seconds", "updated_at")
    list_filter = ("enabled",)
    search_fields = ("workflow", "step")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("workflow", "step") if obj is not None else ()

    def save_model(
        self, request: HttpRequest, obj: BreakerSetting, form: Any, change: bool
    ) -> None:
        with transaction.atomic():
            old = None
            if change:
                old = BreakerSetting.objects.select_for_update().get(pk=obj.pk).values()
                obj.updated_at = Now()
            super().save_model(request, obj, form, change)
            obj.refresh_from_db()
            _breaker_audit(request, obj, "changed" if change else "created", old)

    def delete_model(self, request: HttpRequest, obj: BreakerSetting) -> None:
        with transaction.atomic():
            _breaker_audit(request, obj, "deleted", obj.values())
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[BreakerSetting]) -> None:
        with transaction.atomic():
            for obj in queryset.select_for_update():
                _breaker_audit(request, obj, "deleted", obj.values())
            super().delete_queryset(request, queryset)


@admin.register(BreakerChange)
class BreakerChangeAdmin(admin.ModelAdmin[BreakerChange]):
    list_display = ("at", "workflow", "step", "action", "actor", "old", "new")
    list_filter = ("action",)
    search_fields = ("workflow", "step", "actor")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def declared_limits(workflow: str) -> list[tuple[str, str]]:
    """The concurrency limits some version of `workflow` declares, as (step, per): step
    '' for the workflow's own limit, per '' for a limit without one."""
    found: set[tuple[str, str]] = set()
    for version in registry.versions(workflow):
        wf = registry.get(workflow, version)
        if wf is None:
            continue
        if wf.limit is not None:
            found.add(("", wf.limit.per or ""))
        for s in wf.steps.values():
            found.update((s.name, one.per or "") for one in s.limits)
    return sorted(found)


class LimitSettingForm(forms.ModelForm[LimitSetting]):
    """Only a declared limit can be overridden: the start of a limited step reads the
    override in the statement that takes its slot (docs/operating.md#concurrency-limits);
    declaring a limit is a deploy."""

    class Meta:
        model = LimitSetting
        fields = ("workflow", "step", "per", "max", "reason")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        workflow = data.get("workflow", "")
        step, per = data.get("step", "") or "", data.get("per", "") or ""
        if workflow:
            declared = declared_limits(workflow)
            if not registry.versions(workflow):
                self.add_error("workflow", f"no workflow named {workflow!r} is registered")
            elif (step, per) not in declared:
                said = "; ".join(
                    f"step {s or '(the workflow)'}" + (f" per {p}" if p else "")
                    for s, p in declared
                )
                self.add_error(
                    "step",
                    f"workflow {workflow!r} declares no limit on "
                    f"{('step ' + repr(step)) if step else 'the workflow itself'}"
                    + (f" per {per!r}" if per else "")
                    + (f"; its limits: {said}" if declared else "; it declares none")
                    + ". An override changes a declared limit; declaring one is a deploy.",
                )
        if data.get("max") is not None and data["max"] < 1:
            self.add_error("max", "at least 1")
        return data


def _limit_audit(
    request: HttpRequest, obj: LimitSetting, action: str, old: dict[str, Any] | None
) -> None:
    LimitChange.objects.create(
        workflow=obj.workflow,
        step=obj.step,
        per=obj.per,
        action=action,
        actor=request.user.get_username(),
        old=old,
        new=None if action == "deleted" else obj.values(),
    )


@admin.register(LimitSetting)
class LimitSettingAdmin(admin.ModelAdmin[LimitSetting]):
    """Concurrency limit overrides: a declared limit's max at run time; each change
    audited (LimitChange) in the admin's own transaction."""

    form = LimitSettingForm
    list_display = ("workflow", "step", "per", "max", "updated_at")
    search_fields = ("workflow", "step")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("workflow", "step", "per") if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: LimitSetting, form: Any, change: bool) -> None:
        with transaction.atomic():
            old = None
            if change:
                old = LimitSetting.objects.select_for_update().get(pk=obj.pk).values()
                obj.updated_at = Now()
            super().save_model(request, obj, form, change)
            obj.refresh_from_db()
            _limit_audit(request, obj, "changed" if change else "created", old)

    def delete_model(self, request: HttpRequest, obj: LimitSetting) -> None:
        with transaction.atomic():
            _limit_audit(request, obj, "deleted", obj.values())
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[LimitSetting]) -> None:
        with transaction.atomic():
            for obj in queryset.select_for_update():
                _limit_audit(request, obj, "deleted", obj.values())
            super().delete_queryset(request, queryset)


@admin.register(LimitChange)
class LimitChangeAdmin(admin.ModelAdmin[LimitChange]):
    list_display = ("at", "workflow", "step", "per", "action", "actor", "old", "new")
    list_filter = ("action",)
    search_fields = ("workflow", "step", "actor")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


def declared_rates(workflow: str) -> list[tuple[str, str]]:
    """The rates some version of `workflow` declares, as (step, per): step '' for the
    workflow's own rate, per '' for a rate without one."""
    found: set[tuple[str, str]] = set()
    for version in registry.versions(workflow):
        wf = registry.get(workflow, version)
        if wf is None:
            continue
        if wf.rate is not None:
            found.add(("", wf.rate.per or ""))
        found.update((s.name, s.rate.per or "") for s in wf.steps.values() if s.rate)
    return sorted(found)


class RateSettingForm(forms.ModelForm[RateSetting]):
    """Only a declared rate can be overridden: a start under it reads the override in
    the statement that takes its turn (docs/operating.md#concurrency-limits)."""

    class Meta:
        model = RateSetting
        fields = ("workflow", "step", "per", "starts", "every_seconds", "reason")

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        workflow = data.get("workflow", "")
        step, per = data.get("step", "") or "", data.get("per", "") or ""
        if workflow:
            declared = declared_rates(workflow)
            if not registry.versions(workflow):
                self.add_error("workflow", f"no workflow named {workflow!r} is registered")
            elif (step, per) not in declared:
                said = "; ".join(
                    f"step {s or '(the workflow)'}" + (f" per {p}" if p else "")
                    for s, p in declared
                )
                self.add_error(
                    "step",
                    f"workflow {workflow!r} declares no rate on "
                    f"{('step ' + repr(step)) if step else 'the workflow itself'}"
                    + (f" per {per!r}" if per else "")
                    + (f"; its rates: {said}" if declared else "; it declares none")
                    + ". An override changes a declared rate; declaring one is a deploy.",
                )
        if data.get("starts") is not None and data["starts"] < 1:
            self.add_error("starts", "at least 1")
        if data.get("every_seconds") is not None and not data["every_seconds"] > 0:
            self.add_error("every_seconds", "a positive number of seconds")
        return data


def _rate_audit(
    request: HttpRequest, obj: RateSetting, action: str, old: dict[str, Any] | None
) -> None:
    RateChange.objects.create(
        workflow=obj.workflow,
        step=obj.step,
        per=obj.per,
        action=action,
        actor=request.user.get_username(),
        old=old,
        new=None if action == "deleted" else obj.values(),
    )


@admin.register(RateSetting)
class RateSettingAdmin(admin.ModelAdmin[RateSetting]):
    """Rate overrides: a declared rate's starts per interval at run time; each change
    audited (RateChange) in the admin's own transaction."""

    form = RateSettingForm
    list_display = ("workflow", "step", "per", "starts", "every_seconds", "updated_at")
    search_fields = ("workflow", "step")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return ("workflow", "step", "per") if obj is not None else ()

    def save_model(self, request: HttpRequest, obj: RateSetting, form: Any, change: bool) -> None:
        with transaction.atomic():
            old = None
            if change:
                old = RateSetting.objects.select_for_update().get(pk=obj.pk).values()
                obj.updated_at = Now()
            super().save_model(request, obj, form, change)
            obj.refresh_from_db()
            _rate_audit(request, obj, "changed" if change else "created", old)

    def delete_model(self, request: HttpRequest, obj: RateSetting) -> None:
        with transaction.atomic():
            _rate_audit(request, obj, "deleted", obj.values())
            super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[RateSetting]) -> None:
        with transaction.atomic():
            for obj in queryset.select_for_update():
                _rate_audit(request, obj, "deleted", obj.values())
            super().delete_queryset(request, queryset)


@admin.register(RateChange)
class RateChangeAdmin(admin.ModelAdmin[RateChange]):
    list_display = ("at", "workflow", "step", "per", "action", "actor", "old", "new")
    list_filter = ("action",)
    search_fields = ("workflow", "step", "actor")

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
