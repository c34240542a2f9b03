"""Each success answer of the API, and a few refusals, checked against its OpenAPI
schema with Schemathesis' checks, from concrete requests: a submission's 201 and its
replay's 200, a map run's steps and a page of its events, a claim taken, released and
resolved, a run cancelled, the exports of a map run and of a resolved claim's run, and the
409s that follow.

tests/api/test_fuzz_live_server.py fuzzes the whole API with the Schemathesis CLI; its random
and stateful requests reach these answers only when its walk happens to. This test
reaches each one every time, in-process (Django's WSGI application, inside the test's
transaction), in a few seconds.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer

from runs import engine
from runs.models import Pause
from tests.conftest import make_user
from tests.support import factories
from tests.support.api import api_token

CONFIG = {
    "checks": {
        "enabled": False,
        "not_a_server_error": {"enabled": True},
        "status_code_conformance": {"enabled": True},
        "content_type_conformance": {"enabled": True},
        "response_headers_conformance": {"enabled": True},
        "response_schema_conformance": {"enabled": True},
    },
}


@pytest.fixture
def schema(db, settings) -> Any:
    """The schema /api/schema/ serves, calling the app in-process."""
    settings.API_THROTTLE_USER = "1000000/min"
    generated = SchemaGenerator().get_schema(request=None, public=True)
    raw = json.loads(OpenApiJsonRenderer().render(generated))
    loaded = schemathesis.openapi.from_dict(raw, config=schemathesis.Config.from_dict(CONFIG))
    loaded.app = get_wsgi_application()
    # Django's test client keeps the test's connection open across requests; in-process
    # WSGI calls must too, or each request's start and end would close the test's
    # transaction.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield loaded
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def test_api_success_answers_conform_to_the_schema(schema):
    auth = {"Authorization": f"Token {api_token(make_user('fuzz', 'operators'))}"}
    run = engine.submit_run(workflow="migrate-records", input={"count": 3, "batch_size": 2})
    factories.run_queued(run)
    claim = factories.crashed_merge(change_id=3)
    other = factories.crashed_merge(change_id=4)
    submit = {"workflow": "merge-change", "input": {"change_id": 5}}
    calls = [
        ("/api/runs/", "POST", {"body": submit, "headers": {"Idempotency-Key": "k1"}}, 201),
        ("/api/runs/", "POST", {"body": submit, "headers": {"Idempotency-Key": "k1"}}, 200),
        ("/api/runs/", "GET", {"query": {"status": "succeeded", "ordering": "-updated_at"}}, 200),
        ("/api/runs/{run_id}/", "GET", {"path_parameters": {"run_id": str(run.id)}}, 200),
        ("/api/runs/{run_id}/", "GET", {"path_parameters": {"run_id": str(claim.run_id)}}, 200),
        ("/api/runs/{run_id}/steps/", "GET", {"path_parameters": {"run_id": str(run.id)}}, 200),
        ("/api/runs/{run_id}/export/", "GET", {"path_parameters": {"run_id": str(run.id)}}, 200),
        (
            "/api/runs/{run_id}/events/",
            "GET",
            {"path_parameters": {"run_id": str(run.id)}, "query": {"limit": 3}},
            200,
        ),
        ("/api/claims/", "GET", {"query": {"status": "unresolved"}}, 200),
        ("/api/claims/{claim_id}/take/", "POST", {"path_parameters": {"claim_id": claim.pk}}, 200),
        ("/api/claims/", "GET", {}, 200),
        (
            "/api/claims/{claim_id}/release/",
            "POST",
            {"path_parameters": {"claim_id": claim.pk}},
            200,
        ),
        (
            "/api/claims/{claim_id}/resolve/",
            "POST",
            {
                "path_parameters": {"claim_id": claim.pk},
                "body": {"outcome": "succeeded", "note": "seen", "result": {"merge_id": 1}},
            },
            200,
        ),
        (
            "/api/claims/{claim_id}/resolve/",
            "POST",
            {"path_parameters": {"claim_id": claim.pk}, "body": {"outcome": "failed", "note": "x"}},
            409,
        ),
        # A resolved claim's resolution (who, when, why, evidence) in the export.
        (
            "/api/runs/{run_id}/export/",
            "GET",
            {"path_parameters": {"run_id": str(claim.run_id)}},
            200,
        ),
        (
            "/api/runs/{run_id}/cancel/",
            "POST",
            {"path_parameters": {"run_id": str(other.run_id)}, "body": {"reason": "r"}},
            200,
        ),
        (
            "/api/runs/{run_id}/cancel/",
            "POST",
            {"path_parameters": {"run_id": str(other.run_id)}, "body": {}},
            409,
        ),
        ("/api/workflows/", "GET", {}, 200),
        (
            "/api/pauses/",
            "POST",
            {"body": {"workflow": "merge-change", "step": "merge", "reason": "host down"}},
            201,
        ),
        (
            "/api/pauses/",
            "POST",
            {"body": {"workflow": "merge-change", "step": "merge", "reason": "again"}},
            409,
        ),
        ("/api/pauses/", "POST", {"body": {"workflow": "nope", "reason": "r"}}, 400),
        ("/api/pauses/", "GET", {}, 200),
    ]
    for path, method, parts, status in calls:
        headers = {**auth, **parts.pop("headers", {})}
        case = schema[path][method].Case(headers=headers, **parts)
        response = case.call_and_validate()
        assert response.status_code == status, (path, method, response.text[:300])
    pause = Pause.objects.get()
    for body, status in (({"reason": "back"}, 200), ({"reason": "again"}, 409)):
        case = schema["/api/pauses/{pause_id}/resume/"]["POST"].Case(
            headers=auth, path_parameters={"pause_id": pause.id}, body=body
        )
        response = case.call_and_validate()
        assert response.status_code == status, response.text[:300]
