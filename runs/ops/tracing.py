"""The spans of a run's trace (docs/operating.md#tracing): the engine's only door to
OpenTelemetry. The engine hands it plain values (a traceparent string, a span id, the
attempt's attributes and outcome) and never imports opentelemetry itself (pyproject's
import contracts); which processes trace, and where spans go, is config/tracing.py's.

Off (nothing installed), every function here returns at its first line: no span, no id,
no traceparent, nothing written. On, a run is one trace:

- submit() stores the run's `traceparent`: the web request's span that submitted it
  (its own parent is the API client's `traceparent` header), or else (a schedule's
  tick, the command line, a script) a root span "submit run" of its own;
- each attempt is a span, child of that traceparent, whose span id is drawn at its
  start and written on the attempt's row by the start's own INSERT. The worker that
  runs it ends it with the outcome; a worker that dies (SIGKILL) ends nothing, and the
  recovery that crashes the attempt emits the span with the stored id, its start, and
  its outcome (`crashed`, or `unknown` when a guarded effect's outcome is unknown);
- an operator's resolution of a claim is a span of the same trace, linked to the span
  of the attempt that left the claim unknown.

Spans with a given id go through the SDK's normal path (sampler, limits, resource,
processors) with a preset IdGenerator: the id is the one thing chosen ahead of time,
unlike a hand-built ReadableSpan, which would skip the sampler and the processors'
on_start.
"""

from __future__ import annotations

import re
import secrets
import threading
import time
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags

TRACER_NAME = "durable-runs"
# The attributes' namespace (docs/operating.md#tracing).
A = "durable_runs."
# Outcomes that are not a success: the span's status is ERROR, with the outcome said.
_NOT_OK = {"failed", "retrying", "crashed", "unknown", "fenced"}
_TRACEPARENT = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")


class PresetIds(RandomIdGenerator):
    """Random ids, except the next span's (and a root's trace) id when preset: an
    attempt's span id is drawn at its start and written on its row, and whoever ends
    the attempt, its worker or the recovery after a crash, emits the span with it."""

    def __init__(self) -> None:
        self._local = threading.local()

    def preset(self, span_id: int, trace_id: int | None) -> None:
        self._local.span_id, self._local.trace_id = span_id, trace_id

    def generate_span_id(self) -> int:
        span_id = getattr(self._local, "span_id", None)
        if span_id is None:
            return super().generate_span_id()
        self._local.span_id = None
        return int(span_id)

    def generate_trace_id(self) -> int:
        trace_id = getattr(self._local, "trace_id", None)
        if trace_id is None:
            return super().generate_trace_id()
        self._local.trace_id = None
        return int(trace_id)


_tracer: trace.Tracer | None = None
_ids: PresetIds | None = None


def install(provider: TracerProvider, ids: PresetIds) -> None:
    """Turn the run's spans on, through `provider` (whose id generator is `ids`)."""
    global _tracer, _ids
    _tracer, _ids = provider.get_tracer(TRACER_NAME), ids


def uninstall() -> None:
    global _tracer, _ids
    _tracer, _ids = None, None


def on() -> bool:
    return _tracer is not None


def new_span_id() -> str | None:
    """An attempt's span id (16 hex digits), drawn before its start writes it; None
    when tracing is off (the column stays NULL: nothing written)."""
    if _tracer is None:
        return None
    return f"{secrets.randbits(64) or 1:016x}"


def format_traceparent(ctx: SpanContext) -> str:
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def parse_traceparent(value: str) -> SpanContext | None:
    """A W3C traceparent (version 00) as a remote span context; None if it is not one."""
    found = _TRACEPARENT.fullmatch(value or "")
    if found is None or set(found[1]) == {"0"} or set(found[2]) == {"0"}:
        return None
    flags = TraceFlags(int(found[3], 16))
    return SpanContext(int(found[1], 16), int(found[2], 16), is_remote=True, trace_flags=flags)


def submission_traceparent(workflow: str) -> str:
    """What a new run keeps: "" when tracing is off; the current span's traceparent when
    a web request (a SERVER span: Django's) submits it; else a root span of its own,
    "submit run" (a schedule's tick runs inside a Celery task's span, shared by every run
    of that tick: each run gets a trace of its own instead)."""
    if _tracer is None:
        return ""
    current = trace.get_current_span()
    ctx = current.get_span_context()
    if ctx.is_valid and getattr(current, "kind", None) == SpanKind.SERVER:
        return format_traceparent(ctx)
    root = _tracer.start_span(
        "submit run",
        context=otel_context.Context(),
        attributes={A + "workflow": workflow},
    )
    root.end()
    return format_traceparent(root.get_span_context())


def _parent(traceparent: str, run_id: uuid.UUID | str) -> tuple[otel_context.Context, int | None]:
    """The context to start a run's span in, and the trace id to preset for a root: the
    stored traceparent; for a run without one (submitted while tracing was off) the
    run's id as its trace id, so its spans are still one trace."""
    parent = parse_traceparent(traceparent)
    if parent is not None:
        return trace.set_span_in_context(trace.NonRecordingSpan(parent)), None
    return otel_context.Context(), uuid.UUID(str(run_id)).int


def run_trace_id(traceparent: str, run_id: uuid.UUID | str) -> int:
    parent = parse_traceparent(traceparent)
    return parent.trace_id if parent is not None else uuid.UUID(str(run_id)).int


def _start(
    name: str,
    *,
    traceparent: str,
    run_id: uuid.UUID | str,
    span_id: str | None,
    start_ns: int | None,
    attributes: Mapping[str, Any],
    links: list[Link] | None = None,
) -> trace.Span:
    assert _tracer is not None and _ids is not None
    context, root_trace = _parent(traceparent, run_id)
    if span_id is not None:
        _ids.preset(int(span_id, 16), root_trace)
    elif root_trace is not None:
        _ids.preset(secrets.randbits(64) or 1, root_trace)
    return _tracer.start_span(
        name,
        context=context,
        kind=SpanKind.INTERNAL,
        attributes={A + k: v for k, v in attributes.items() if v is not None and v != ""},
        links=links,
        start_time=start_ns,
    )


def _close(span: trace.Span, outcome: str, end_ns: int | None = None) -> None:
    span.set_attribute(A + "outcome", outcome)
    if outcome in _NOT_OK:
        span.set_status(Status(StatusCode.ERROR, outcome))
    span.end(end_time=end_ns)


class AttemptSpan:
    """An attempt's live span, current while its effect runs (the database's spans and
    the log lines written meanwhile are its)."""

    def __init__(self, span: trace.Span) -> None:
        self.span = span
        self._token = otel_context.attach(trace.set_span_in_context(span))

    def end(self, outcome: str) -> None:
        """End it with `outcome`; `fenced` (the attempt lost its lease): abandon it, since
        the recovery that crashed the attempt emits its span (one span per id, not two)."""
        if outcome == "fenced":
            self.abandon()
            return
        otel_context.detach(self._token)
        _close(self.span, outcome)

    def abandon(self) -> None:
        """Leave it unended (never exported): the attempt is still running, and whoever
        crashes it emits its span."""
        otel_context.detach(self._token)


def attempt_name(workflow: str, step_name: str) -> str:
    return f"attempt {workflow}.{step_name}"


def start_attempt(
    *,
    traceparent: str,
    run_id: uuid.UUID | str,
    span_id: str,
    start_ns: int,
    workflow: str,
    step_name: str,
    attributes: Mapping[str, Any],
) -> AttemptSpan | None:
    """The live span of an attempt that is starting; None when tracing is off."""
    if _tracer is None:
        return None
    return AttemptSpan(
        _start(
            attempt_name(workflow, step_name),
            traceparent=traceparent,
            run_id=run_id,
            span_id=span_id,
            start_ns=start_ns,
            attributes={"workflow": workflow, **attributes},
        )
    )


def emit_attempt(
    *,
    traceparent: str,
    run_id: uuid.UUID | str,
    span_id: str,
    started_at: datetime | None,
    workflow: str,
    step_name: str,
    attributes: Mapping[str, Any],
    outcome: str,
) -> None:
    """The span of an attempt whose worker never ended it (killed, or cut off until
    its lease expired), emitted by the recovery that crashed it: the stored id, the
    attempt's start on the database's clock, ended now."""
    if _tracer is None:
        return
    start_ns = int(started_at.timestamp() * 1e9) if started_at is not None else None
    span = _start(
        attempt_name(workflow, step_name),
        traceparent=traceparent,
        run_id=run_id,
        span_id=span_id,
        start_ns=start_ns,
        attributes={"workflow": workflow, "recovered": True, **attributes},
    )
    _close(span, outcome)


def emit_resolution(
    *,
    traceparent: str,
    run_id: uuid.UUID | str,
    attempt_span_id: str | None,
    start_ns: int,
    attributes: Mapping[str, Any],
) -> None:
    """The span of a claim's resolution, in the run's trace, linked to the span of the
    attempt that left the claim unknown (when that attempt had one)."""
    if _tracer is None:
        return
    links = []
    if attempt_span_id:
        linked = SpanContext(
            run_trace_id(traceparent, run_id),
            int(attempt_span_id, 16),
            is_remote=False,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        links.append(Link(linked, {A + "relation": "left the claim unknown"}))
    span = _start(
        "claim resolution",
        traceparent=traceparent,
        run_id=run_id,
        span_id=None,
        start_ns=start_ns,
        attributes=attributes,
        links=links,
    )
    _close(span, str(attributes.get("outcome", "")))


def now_ns() -> int:
    return time.time_ns()


def current_ids() -> tuple[str, str] | None:
    """The current span's trace and span ids (hex), for log lines; None without one."""
    if _tracer is None:
        return None
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"
