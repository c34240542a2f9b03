"""OpenTelemetry for one process (docs/operating.md#tracing): off unless the standard
OTEL_* variables ask for it, set up per process, after any fork (a BatchSpanProcessor's
thread does not survive one): config/wsgi.py in each web process (gunicorn imports the
app in each worker, after its fork), config/celery.py in each worker process
(worker_process_init: a prefork pool's child, or a solo worker itself) and in beat.

On: Django's requests, Celery's messages and psycopg's statements are traced by the
upstream instrumentations, and the run's own spans (runs/ops/tracing.py) go the same
way: OTLP over HTTP, batched. Off: nothing here is even imported beyond this module,
and runs/ops/tracing.py returns at its first line.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

log = logging.getLogger(__name__)

_provider: Any = None
_set_up_in: int | None = None


def wanted(env: Mapping[str, str] | None = None) -> bool:
    """Whether this process traces: not with OTEL_SDK_DISABLED=true; with
    OTEL_TRACES_EXPORTER, when it names `otlp` (`none`, `console`…: off here); without
    it, when an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or …_TRACES_ENDPOINT)."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    exporters = env.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporters:
        return "otlp" in {e.strip() for e in exporters.split(",")}
    return bool(
        env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    )


def setup(role: str) -> bool:
    """Trace this process if the environment asks for it (wanted()), as the service
    OTEL_SERVICE_NAME or `durable-runs-<role>` (web, worker, beat); once per process.
    True if this process traces."""
    global _provider, _set_up_in
    if _set_up_in == os.getpid():
        return True
    if not wanted():
        return False
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.instrumentation.celery import CeleryInstrumentor
    from opentelemetry.instrumentation.django import DjangoInstrumentor
    from opentelemetry.instrumentation.psycopg import PsycopgInstrumentor
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from runs.ops import tracing

    service = os.environ.get("OTEL_SERVICE_NAME", "").strip() or f"durable-runs-{role}"
    ids = tracing.PresetIds()
    # The sampler: OTEL_TRACES_SAMPLER (and _ARG), read by the SDK; parent-based by default.
    provider = TracerProvider(resource=Resource.create({SERVICE_NAME: service}), id_generator=ids)
    # Endpoint, headers, timeout and compression from OTEL_EXPORTER_OTLP_*; the batch's
    # size and delay from OTEL_BSP_*.
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    if _set_up_in is None:
        trace.set_tracer_provider(provider)
        DjangoInstrumentor().instrument(tracer_provider=provider)
        CeleryInstrumentor().instrument(tracer_provider=provider)  # type: ignore[no-untyped-call]
        # Django's connections are opened by psycopg.connect, which this wraps.
        PsycopgInstrumentor().instrument(tracer_provider=provider, skip_dep_check=True)
    tracing.install(provider, ids)
    _provider, _set_up_in = provider, os.getpid()
    log.info("tracing on: service %s, exporting OTLP/HTTP", service)
    return True


def shutdown() -> None:
    """Export what is batched and stop (a process that ends: a pool's child leaves
    through os._exit, which runs no atexit)."""
    global _provider
    provider, _provider = _provider, None
    if provider is not None:
        provider.shutdown()
