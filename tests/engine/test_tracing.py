"""A run is one trace (docs/operating.md#tracing): each attempt a span, child of the
run's stored traceparent, with its attributes and outcome; a crashed attempt's span
emitted by the recovery with the id its start wrote; a resolution's span linked to the
attempt that left its claim unknown. Off, nothing: no span, no traceparent, no span id.
The spans are the SDK's own, read back from its InMemorySpanExporter."""

from __future__ import annotations

import json
import logging

import pytest
from opentelemetry import trace
from opentelemetry.instrumentation.django import DjangoInstrumentor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, ParentBased
from opentelemetry.trace import SpanKind, StatusCode

from config.logs import ContextFilter, JsonFormatter
from config.tracing import wanted
from runs import engine
from runs.models import Attempt, Claim, Run
from runs.ops import tracing
from runs.states import AttemptStatus, ClaimStatus, RunStatus, StepStatus
from runs.testing import run_inline
from tests.support.api import token_client

A = "durable_runs."


def _provider(sampler=ALWAYS_ON):
    exporter = InMemorySpanExporter()
    ids = tracing.PresetIds()
    provider = TracerProvider(sampler=sampler, id_generator=ids, shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, ids, exporter


@pytest.fixture
def spans():
    provider, ids, exporter = _provider()
    tracing.install(provider, ids)
    exporter.provider = provider  # for an instrumentation a test turns on
    try:
        yield exporter
    finally:
        tracing.uninstall()
        provider.shutdown()


def _attempts(exporter):
    return [s for s in exporter.get_finished_spans() if s.name.startswith("attempt ")]


def _by(spans, **attrs):
    found = [s for s in spans if all(s.attributes.get(A + k) == v for k, v in attrs.items())]
    assert len(found) == 1, [dict(s.attributes) for s in spans]
    return found[0]


def test_a_runs_attempts_are_children_of_its_traceparent_and_a_crash_still_has_its_span(db, spans):
    run = run_inline("traced-order", input={"order": 7}, faults=["after_effect:charge"])

    assert run.status == RunStatus.NEEDS_RECONCILIATION
    parent = tracing.parse_traceparent(run.traceparent)
    assert parent is not None
    # The run's own root: a submission from no web request (here, a script).
    (root,) = [s for s in spans.get_finished_spans() if s.name == "submit run"]
    assert (root.context.trace_id, root.context.span_id) == (parent.trace_id, parent.span_id)
    assert root.parent is None and root.attributes[A + "workflow"] == "traced-order"

    attempts = _attempts(spans)
    assert len(attempts) == 4  # charge killed, charge again, pack, ship
    for span in attempts:
        assert span.context.trace_id == parent.trace_id
        assert span.parent.span_id == parent.span_id
        assert span.kind == SpanKind.INTERNAL
    rows = {
        (a.step.key, a.number): a for a in Attempt.objects.filter(run=run).select_related("step")
    }
    assert set(rows) == {("charge", 1), ("charge", 2), ("pack", 1), ("ship", 1)}
    for (step, number), row in rows.items():
        span = _by(attempts, step=step, attempt=number)
        assert f"{span.context.span_id:016x}" == row.span_id  # the id its start wrote
        assert span.name == f"attempt traced-order.{step}"
        assert span.attributes[A + "workflow"] == "traced-order"
        assert span.attributes[A + "run_id"] == str(run.id)

    pack = _by(attempts, step="pack")
    assert pack.attributes[A + "outcome"] == "succeeded"
    assert pack.attributes[A + "effect_kind"] == "pure"
    assert A + "claim_key" not in pack.attributes  # a pure step takes no claim
    assert pack.status.status_code == StatusCode.UNSET

    killed = _by(attempts, step="charge", attempt=1)
    assert rows[("charge", 1)].status == AttemptStatus.CRASHED
    assert killed.attributes[A + "outcome"] == "crashed"
    assert killed.attributes[A + "recovered"] is True
    assert killed.status.status_code == StatusCode.ERROR
    # Its start on the database's clock, as the row says.
    assert killed.start_time == int(rows[("charge", 1)].started_at.timestamp() * 1e9)
    retried = _by(attempts, step="charge", attempt=2)
    assert retried.attributes[A + "outcome"] == "succeeded"
    charge_key = Claim.objects.get(run=run, step__key="charge").key
    assert killed.attributes[A + "claim_key"] == retried.attributes[A + "claim_key"] == charge_key
    assert retried.attributes[A + "effect_kind"] == "idempotent"

    ship = _by(attempts, step="ship")
    claim = Claim.objects.get(run=run, step__key="ship")
    assert ship.attributes[A + "outcome"] == "unknown"
    assert ship.attributes[A + "claim_key"] == claim.key
    assert ship.attributes[A + "effect_kind"] == "guarded"
    assert ship.status.status_code == StatusCode.ERROR


def test_a_resolution_is_a_span_of_the_runs_trace_linked_to_the_attempt_it_decides(
    db, spans, django_capture_on_commit_callbacks
):
    run = run_inline("traced-order", input={"order": 8})
    claim = Claim.objects.get(run=run, step__key="ship", status=ClaimStatus.UNRESOLVED)
    ship = _by(_attempts(spans), step="ship")
    spans.clear()

    with django_capture_on_commit_callbacks(execute=True):
        engine.resolve_claim(claim.id, "succeeded", actor="ann", note="shipped, says the carrier")

    (resolution,) = spans.get_finished_spans()
    parent = tracing.parse_traceparent(run.traceparent)
    assert resolution.name == "claim resolution"
    assert resolution.context.trace_id == parent.trace_id
    assert resolution.parent.span_id == parent.span_id
    assert dict(resolution.attributes) == {
        A + "workflow": "traced-order",
        A + "run_id": str(run.id),
        A + "claim_key": claim.key,
        A + "outcome": "succeeded",
        A + "actor": "ann",
    }
    (link,) = resolution.links
    assert (link.context.trace_id, link.context.span_id) == (
        ship.context.trace_id,
        ship.context.span_id,
    )
    assert link.attributes == {A + "relation": "left the claim unknown"}
    assert Run.objects.get(pk=run.id).status == RunStatus.SUCCEEDED


def test_a_guarded_attempt_killed_in_its_effect_is_emitted_unknown_by_the_recovery(
    db, spans, django_capture_on_commit_callbacks
):
    run = run_inline("traced-order", input={"order": 9}, faults=["after_claim:ship"])

    row = Attempt.objects.get(run=run, step__key="ship")
    assert (row.status, row.step.status) == (AttemptStatus.CRASHED, StepStatus.UNRESOLVED)
    span = _by(_attempts(spans), step="ship")
    assert f"{span.context.span_id:016x}" == row.span_id
    assert (span.attributes[A + "outcome"], span.attributes[A + "recovered"]) == ("unknown", True)
    spans.clear()

    claim = Claim.objects.get(run=run, step__key="ship")
    with django_capture_on_commit_callbacks(execute=True):
        engine.resolve_claim(claim.id, "failed", actor="bob", note="nothing left the warehouse")
    (resolution,) = spans.get_finished_spans()
    assert resolution.links[0].context.span_id == span.context.span_id
    assert resolution.attributes[A + "outcome"] == "failed"


def test_off_nothing_is_traced_nor_written(db):
    provider, _, exporter = _provider()  # made, never installed: tracing is off
    assert not tracing.on()
    assert tracing.new_span_id() is None
    assert tracing.submission_traceparent("traced-order") == ""

    run = run_inline("traced-order", input={"order": 10}, faults=["after_effect:charge"])
    engine.resolve_claim(
        Claim.objects.get(run=run, step__key="ship").id, "succeeded", actor="ann", note="ok"
    )

    assert Run.objects.get(pk=run.id).traceparent == ""
    assert list(Attempt.objects.filter(run=run).values_list("span_id", flat=True)) == [None] * 4
    assert exporter.get_finished_spans() == ()
    assert trace.get_current_span().get_span_context().is_valid is False
    provider.shutdown()


def test_a_trace_sampled_out_at_its_root_stays_out_for_every_attempt(db):
    provider, ids, exporter = _provider(sampler=ParentBased(ALWAYS_OFF))
    tracing.install(provider, ids)
    try:
        run = run_inline("traced-order", input={"order": 11}, faults=["after_effect:charge"])
    finally:
        tracing.uninstall()
        provider.shutdown()
    # Not sampled (the flags' low bit), and so said to its attempts.
    assert int(run.traceparent.split("-")[3], 16) & 1 == 0
    assert exporter.get_finished_spans() == ()


def test_an_api_submission_keeps_the_request_span_a_client_traceparent_parents(db, spans, operator):
    client_trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    header = f"00-{client_trace}-00f067aa0ba902b7-01"
    instrumentor = DjangoInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    try:
        response = token_client(operator).post(
            "/api/runs/",
            {"workflow": "traced-order", "input": {"order": 12}},
            format="json",
            HTTP_TRACEPARENT=header,
        )
    finally:
        instrumentor.uninstrument()
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    (request,) = [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER]
    assert run.traceparent == (
        f"00-{client_trace}-{request.context.span_id:016x}-01"
    )  # the request's span, in the client's trace
    assert request.parent.span_id == 0x00F067AA0BA902B7
    assert not [s for s in spans.get_finished_spans() if s.name == "submit run"]


def test_a_page_submission_keeps_the_pages_request_span(db, spans, operator_client):
    instrumentor = DjangoInstrumentor()
    instrumentor.instrument(tracer_provider=spans.provider)
    try:
        response = operator_client.post(
            "/runs/new/", {"workflow": "traced-order", "input.order": "15"}
        )
    finally:
        instrumentor.uninstrument()
    assert response.status_code == 302, response.content[:500]
    run = Run.objects.get()
    (request,) = [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER]
    assert request.parent is None  # no client traceparent: the page's span is the root
    ctx, stored = request.context, tracing.parse_traceparent(run.traceparent)
    assert (stored.trace_id, stored.span_id) == (ctx.trace_id, ctx.span_id)
    assert stored.trace_flags.sampled


def test_a_schedules_tick_gives_each_run_a_root_of_its_own_not_the_tasks_trace(db, spans):
    """A tick runs inside a Celery task's span (CONSUMER) that every run it fires
    shares: each run starts a trace of its own instead."""
    tracer = spans.provider.get_tracer("celery")
    with tracer.start_as_current_span("run/runs.fire_schedules", kind=SpanKind.CONSUMER) as task:
        first = engine.submit_run(workflow="traced-order", input={"order": 13})
        second = engine.submit_run(workflow="traced-order", input={"order": 14})
    roots = [tracing.parse_traceparent(r.traceparent) for r in (first, second)]
    task_trace = task.get_span_context().trace_id
    assert roots[0].trace_id != roots[1].trace_id
    assert task_trace not in {roots[0].trace_id, roots[1].trace_id}
    submits = {s.context.span_id: s for s in spans.get_finished_spans() if s.name == "submit run"}
    assert {r.span_id for r in roots} == set(submits)
    assert all(s.parent is None for s in submits.values())


def test_log_lines_carry_the_current_spans_ids(db, spans):
    record = logging.makeLogRecord({"msg": "hello", "name": "t", "levelname": "INFO"})
    with spans.provider.get_tracer("test").start_as_current_span("work") as span:
        ContextFilter().filter(record)
        line = json.loads(JsonFormatter().format(record))
        ctx = span.get_span_context()
    assert (line["trace_id"], line["span_id"]) == (f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}")
    assert record.context_text == f" [trace_id={ctx.trace_id:032x} span_id={ctx.span_id:016x}]"
    outside = logging.makeLogRecord({"msg": "hello"})
    ContextFilter().filter(outside)
    assert "trace_id" not in outside.context


@pytest.mark.parametrize(
    ("env", "on"),
    [
        ({}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}, True),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318/v1/traces"}, True),
        ({"OTEL_TRACES_EXPORTER": "otlp"}, True),
        ({"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"}, False),
        ({"OTEL_TRACES_EXPORTER": "otlp", "OTEL_SDK_DISABLED": "true"}, False),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_SDK_DISABLED": "TRUE"}, False),
    ],
)
def test_the_switch_is_the_standard_environment(env, on):
    assert wanted(env) is on
