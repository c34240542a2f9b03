"""The wire (docs/operating.md#tracing): a run submitted by `POST /api/runs/` with a
client's traceparent, through three steps on real workers exporting OTLP/HTTP, one
attempt SIGKILLed and retried, and an operator's resolution of the claim the last step
left unknown, arrives at an OTLP receiver as ONE trace: the request's span, every
attempt's span (the killed one's too, emitted by the recovery on another process) as its
children, the resolution's span linked to the attempt that left the claim unknown."""

from __future__ import annotations

import signal

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.django import DjangoInstrumentor
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from reconciliation import services
from runs.models import Attempt, Claim, Run
from runs.ops import tracing
from runs.states import AttemptStatus, ClaimStatus, RunStatus
from tests.conftest import make_user
from tests.support.api import token_client
from tests.support.otlp import otlp_receiver
from tests.support.waiting import wait_for

from .helpers import wait_settled

pytestmark = [pytest.mark.workers, pytest.mark.servers, pytest.mark.timeout(120)]

A = "durable_runs."
CLIENT_TRACE = "0af7651916cd43dd8448eb211c80319c"
CLIENT_SPAN = "b7ad6b7169203331"
SERVER, INTERNAL = 2, 1


@pytest.fixture
def receiver():
    with otlp_receiver() as state:
        yield state


@pytest.fixture
def web_tracing(receiver):
    """This test process as a traced web process: its requests (Django's
    instrumentation) and the run's spans it emits (the resolution's) exported to the
    receiver, as config/tracing.py sets up gunicorn's workers."""
    ids = tracing.PresetIds()
    provider = TracerProvider(
        resource=Resource.create({SERVICE_NAME: "durable-runs-web"}),
        id_generator=ids,
        shutdown_on_exit=False,
    )
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(f"{receiver.url}/v1/traces")))
    tracing.install(provider, ids)
    instrumentor = DjangoInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield provider
    finally:
        instrumentor.uninstrument()
        tracing.uninstall()
        provider.shutdown()


def test_a_run_from_its_request_through_a_kill_to_its_resolution_is_one_trace(
    cluster, receiver, web_tracing
):
    otel = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "100",
        "OTEL_SERVICE_NAME": "",  # each process's own default: durable-runs-worker
    }
    doomed = cluster.worker(faults="after_effect:charge", **otel)
    cluster.beat(**otel)
    ann = make_user("ann", "operators")
    response = token_client(ann).post(
        "/api/runs/",
        {"workflow": "traced-order", "input": {"order": 5}},
        format="json",
        HTTP_TRACEPARENT=f"00-{CLIENT_TRACE}-{CLIENT_SPAN}-01",
    )
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert doomed.wait_exit() == -signal.SIGKILL, doomed.output()[-2000:]
    cluster.worker(**otel)
    run = wait_settled(run, cluster)
    assert run.status == RunStatus.NEEDS_RECONCILIATION, cluster.logs()
    claim = Claim.objects.get(run=run, step__key="ship", status=ClaimStatus.UNRESOLVED)

    services.resolve(claim_id=claim.id, user=ann, outcome="succeeded", note="the parcel left")
    assert Run.objects.get(pk=run.id).status == RunStatus.SUCCEEDED
    web_tracing.force_flush()

    attempts = {
        (a.step.key, a.number): a for a in Attempt.objects.filter(run=run).select_related("step")
    }
    assert {k: a.status for k, a in attempts.items()} == {
        ("charge", 1): AttemptStatus.CRASHED,  # the SIGKILLed one
        ("charge", 2): AttemptStatus.SUCCEEDED,
        ("pack", 1): AttemptStatus.SUCCEEDED,
        ("ship", 1): AttemptStatus.UNRESOLVED,
    }

    def ours() -> list:
        spans = receiver.received()
        named = [s for s in spans if s.name.startswith("attempt ") or s.kind == SERVER]
        named += [s for s in spans if s.name == "claim resolution"]
        return named if len(named) >= 6 else []

    spans = wait_for(ours, timeout=30, what="the run's six spans", on_timeout=cluster.logs)
    # ONE trace: the client's.
    assert {s.trace_id for s in spans} == {CLIENT_TRACE}
    (request,) = [s for s in spans if s.kind == SERVER and s.trace_id == CLIENT_TRACE]
    assert (request.service, request.parent_span_id) == ("durable-runs-web", CLIENT_SPAN)
    assert run.traceparent == f"00-{CLIENT_TRACE}-{request.span_id}-01"

    by_attempt = {
        (s.attributes[A + "step"], s.attributes[A + "attempt"]): s
        for s in spans
        if s.name.startswith("attempt ")
    }
    assert set(by_attempt) == set(attempts)  # each attempt's span, exactly once
    for key, span in by_attempt.items():
        assert span.span_id == attempts[key].span_id  # the id its start wrote on its row
        assert span.parent_span_id == request.span_id  # children of the request
        assert span.service == "durable-runs-worker"
        assert span.kind == INTERNAL
        assert span.attributes[A + "workflow"] == "traced-order"
        assert span.attributes[A + "run_id"] == str(run.id)
    outcomes = {k: s.attributes[A + "outcome"] for k, s in by_attempt.items()}
    assert outcomes == {
        ("charge", 1): "crashed",
        ("charge", 2): "succeeded",
        ("pack", 1): "succeeded",
        ("ship", 1): "unknown",
    }
    killed = by_attempt[("charge", 1)]
    # Emitted by the recovery on the second worker: the killed worker ended nothing.
    assert killed.attributes[A + "recovered"] is True
    assert killed.attributes[A + "worker"] == attempts[("charge", 1)].worker
    assert killed.attributes[A + "worker"] != by_attempt[("charge", 2)].attributes[A + "worker"]
    charge_key = Claim.objects.get(run=run, step__key="charge").key
    assert {by_attempt[("charge", n)].attributes[A + "claim_key"] for n in (1, 2)} == {charge_key}
    assert by_attempt[("ship", 1)].attributes[A + "claim_key"] == claim.key
    assert by_attempt[("ship", 1)].attributes[A + "effect_kind"] == "guarded"

    (resolution,) = [s for s in spans if s.name == "claim resolution"]
    assert (resolution.service, resolution.parent_span_id) == ("durable-runs-web", request.span_id)
    assert resolution.attributes[A + "actor"] == "ann"
    assert resolution.attributes[A + "outcome"] == "succeeded"
    (link,) = resolution.links
    assert (link.trace_id, link.span_id) == (CLIENT_TRACE, by_attempt[("ship", 1)].span_id)

    # The database's statements of an attempt are its children (psycopg's spans).
    pack = by_attempt[("pack", 1)]
    statements = [s for s in receiver.received() if s.parent_span_id == pack.span_id]
    assert statements and {s.attributes.get("db.system") for s in statements} == {"postgresql"}
