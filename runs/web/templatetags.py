"""Template helpers for the page conventions (docs/operating.md#the-operator-pages): a status is a
word and a colour, ids are shortened with the full value in `title` and a copy button,
times are relative with the absolute time in `title`, JSON is pretty-printed. Every
value is escaped (format_html), so a payload can never inject markup."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

from django import template
from django.http import QueryDict
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from runs.pages.timefmt import (
    absolute,
    duration_text,
    elapsed_text,
    humanize_delta,
    span_text,
    to_the_second,
)

register = template.Library()


@register.simple_tag
def status(value: Any) -> str:
    word = str(value or "")
    return format_html('<span class="status status-{}">{}</span>', word, word.replace("_", " "))


@register.simple_tag
def short_id(value: Any, length: int = 8, copy: bool = True) -> str:
    full = str(value)
    short = full if len(full) <= length + 1 else f"{full[:length]}…"
    if not copy:
        return format_html('<span class="id" title="{}">{}</span>', full, short)
    return format_html(
        '<span class="id" title="{}">{}</span><button type="button" class="copy" '
        'data-copy="{}" aria-label="copy {}">copy</button>',
        full,
        short,
        full,
        full,
    )


@register.simple_tag
def ago(value: datetime | None, now: datetime | None = None) -> str:
    if value is None:
        return mark_safe('<span class="muted">—</span>')  # a constant
    now = now or timezone.now()
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        value.isoformat(),
        to_the_second(value),
        humanize_delta(now - value),
    )


@register.simple_tag
def duration(start: datetime | None, end: datetime | None = None) -> str:
    if start is None:
        return "—"
    return elapsed_text(((end or timezone.now()) - start).total_seconds())


@register.filter
def pretty_json(value: Any) -> str:
    """Indented JSON text (autoescaped by the template like any other string)."""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False, default=str)


@register.simple_tag(takes_context=True)
def url_with(context: Any, **changes: Any) -> str:
    """The current query string with some parameters changed (None or "" removes one).
    Empty parameters are left out: a form sends every field, set or not, and an empty
    one says nothing (a link keeps only what is in effect)."""
    params = QueryDict(mutable=True)
    for key, values in context["request"].GET.lists():
        if kept := [v for v in values if v]:
            params.setlist(key, kept)
    for key, value in changes.items():
        if value in (None, ""):
            params.pop(key, None)
        else:
            params[key] = value
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"


CAUSES = {
    "worker_died": "worker died",
    "exception": "raised an error",
    "postcondition": "failed its postcondition",
}


@register.filter
def cause_label(cause: str) -> str:
    """What made a claim unresolved, in words (reconciliation.queries.classify)."""
    return CAUSES.get(cause, cause or "—")


@register.filter
def timedelta_words(value: timedelta | None) -> str:
    """'4 min', '2 h 5 min' for a duration (None: '—')."""
    if value is None:
        return "—"
    return span_text(value)


@register.filter
def seconds_words(value: float | None) -> str:
    """A number of seconds as the pages say a span: "1 h 30 min", "45 s"."""
    return "" if value is None else duration_text(float(value))


@register.filter
def bar_y(height: float, chart_height: float) -> float:
    """The y of a bar of `height` standing on the chart's base line."""
    return round(float(chart_height) - float(height), 1)


@register.filter
def words(value: Any) -> str:
    """A machine word as words: needs_reconciliation → needs reconciliation."""
    return str(value or "").replace("_", " ")


@register.simple_tag
def offset(value: datetime | None, start: datetime | None) -> str:
    """A moment of a run, relative to its submission (`+2.35 s`), with the absolute
    time in `title`: inside one run, "how long after it began" is what people compare."""
    if value is None or start is None:
        return mark_safe('<span class="muted">—</span>')  # a constant
    seconds = (value - start).total_seconds()
    sign = "-" if seconds < 0 else "+"
    return format_html(
        '<time datetime="{}" title="{}">{}{}</time>',
        value.isoformat(),
        absolute(value),
        sign,
        duration_text(abs(seconds)),
    )


@register.simple_tag
def took(start: datetime | None, end: datetime | None) -> str:
    """How long from start to end (or until now, for something still going on)."""
    if start is None:
        return "—"
    return duration_text(((end or timezone.now()) - start).total_seconds())


SUMMARY_KEYS = (
    "worker",
    "error",
    "reason",
    "outcome",
    "actor",
    "note",
    "resolved_as",
    "resolved_by",
    "items",
    "completed",
    "skipped",
    "batches",
    "delay",
    "retaken",
    "key",
)
SUMMARY_LIMIT = 160  # characters


@register.filter
def payload_summary(payload: Any) -> str:
    """One line of the payload's telling fields, for the event log's rows (the whole
    payload is one click away, pretty-printed)."""
    if not isinstance(payload, dict):
        return ""
    parts = []
    for key in SUMMARY_KEYS:
        value = payload.get(key)
        if value is None or value == "" or isinstance(value, dict | list):
            continue
        parts.append(f"{key}: {value}")
    text = " · ".join(parts)
    return text if len(text) <= SUMMARY_LIMIT else text[: SUMMARY_LIMIT - 1] + "…"


@register.filter
def json_value(value: Any) -> str:
    """A value as JSON text: the submit form's select options carry typed choices."""
    return json.dumps(value)


@register.filter
def thousands(value: Any) -> str:
    """A count with thousands separators, as the runs list says them: 10,000."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)
