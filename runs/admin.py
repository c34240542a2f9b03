"""The admin: where operators edit schedules (and, with retention, its policies)."""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from runs.engine.schedules import prepare_for_save
from runs.models import Schedule

# What the code owns for a schedule declared with wf.schedule(...).
CODE_OWNED = ("name", "workflow", "version", "cron", "timezone", "input", "missed", "max_catch_up")


@admin.register(Schedule)
class ScheduleAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
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
        "updated_at",
    )

    @admin.display(boolean=True, description="error")
    def has_error(self, obj: Schedule) -> bool:
        return bool(obj.last_error)

    def get_readonly_fields(self, request: HttpRequest, obj: Schedule | None = None) -> Any:
        if obj is not None and obj.declared_in_code:
            return (*CODE_OWNED, *self.readonly_fields)
        return self.readonly_fields

    def save_model(self, request: HttpRequest, obj: Schedule, form: Any, change: bool) -> None:
        previous = Schedule.objects.filter(pk=obj.pk).first() if change else None
        prepare_for_save(obj, previous)
        super().save_model(request, obj, form, change)
