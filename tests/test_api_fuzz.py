"""The API fuzzed from its own OpenAPI schema (Schemathesis v4, as a library): every
operation, the mutating ones included, with generated valid and invalid requests as
an operator with a token. No answer may be a 5xx, and every answer must be one the
schema documents (status, content type, headers, body).

Deterministic: a fixed seed, derandomized generation, no example database, and a
bounded number of examples per operation, so the whole test takes well under a minute.
The requests go through Django's WSGI application in-process, inside the test's
transaction.

The schema is the one /api/schema/ serves (drf-spectacular's generator), loaded when
the module is collected: Schemathesis' lazy fixture loader does not work with this
pytest (it sets a node attribute pytest 9 removed), and a schema known at collection
gives one test per operation. The operator's token is fixed, so the headers are known
then too: the fixture stores its hash, as knox stores the hash of a token it makes.
"""

from __future__ import annotations

import json

import hypothesis
import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from drf_spectacular.renderers import OpenApiJsonRenderer
from knox.crypto import hash_token
from knox.models import AuthToken
from knox.settings import CONSTANTS

from runs import engine
from tests import factories
from tests.conftest import make_user

EXAMPLES_PER_OPERATION = 25
TOKEN = "f" * 64  # the length and alphabet of knox's tokens

CONFIG = {
    "seed": 20261129,
    "headers": {"Authorization": f"Token {TOKEN}"},
    "generation": {
        "max-examples": EXAMPLES_PER_OPERATION,
        "deterministic": True,
        "database": "none",
    },
    # Stateful sequences need links between operations, which the schema does not declare.
    "phases": {"stateful": {"enabled": False}},
    "checks": {
        "enabled": False,
        "not_a_server_error": {"enabled": True},
        "status_code_conformance": {"enabled": True},
        "content_type_conformance": {"enabled": True},
        "response_headers_conformance": {"enabled": True},
        "response_schema_conformance": {"enabled": True},
    },
}


def load_schema() -> schemathesis.BaseSchema:
    generated = SchemaGenerator().get_schema(request=None, public=True)
    raw = json.loads(OpenApiJsonRenderer().render(generated))
    schema = schemathesis.openapi.from_dict(raw, config=schemathesis.Config.from_dict(CONFIG))
    schema.app = get_wsgi_application()
    return schema


schema = load_schema()


@pytest.fixture
def fuzzed_api(db, settings):
    # Fuzzing sends hundreds of requests as one user in a few seconds.
    settings.API_THROTTLE_USER = "1000000/min"
    AuthToken(
        digest=hash_token(TOKEN),
        token_key=TOKEN[: CONSTANTS.TOKEN_KEY_LENGTH],
        user=make_user("fuzz", "operators"),
    ).save()
    # Something to find: a run, and an unresolved claim of another.
    engine.submit_run(workflow="merge-change", input={"change_id": 1})
    factories.crashed_merge(change_id=2)
    # Django's test client keeps the test's connection open across requests; in-process
    # WSGI calls must too, or each request's start and end would close the test's
    # transaction.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


def test_api_fuzz_covers_every_operation():
    operations = {
        f"{result.ok().method.upper()} {result.ok().path}" for result in schema.get_all_operations()
    }
    assert operations == {
        "GET /api/runs/",
        "POST /api/runs/",
        "GET /api/runs/{run_id}/",
        "GET /api/runs/{run_id}/steps/",
        "GET /api/runs/{run_id}/events/",
        "POST /api/runs/{run_id}/cancel/",
        "POST /api/runs/{run_id}/steps/{step}/retry/",
        "POST /api/runs/{run_id}/signals/{name}/",
        "GET /api/claims/",
        "POST /api/claims/{claim_id}/resolve/",
        "POST /api/claims/{claim_id}/take/",
        "POST /api/claims/{claim_id}/release/",
        "GET /api/workflows/",
    }


@schema.parametrize()
# Deliberate: an operation's examples share the test's data and transaction.
@hypothesis.settings(suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture])
def test_api_fuzz_no_server_error_and_every_answer_documented(case, fuzzed_api):
    case.call_and_validate()


def test_api_success_answers_conform_to_the_schema(fuzzed_api):
    """Random ids rarely name a run or a claim, so the answers of the success paths are
    checked here, with concrete requests through the same checks."""
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
    ]
    for path, method, parts, status in calls:
        headers = {**CONFIG["headers"], **parts.pop("headers", {})}
        case = schema[path][method].Case(headers=headers, **parts)
        response = case.call_and_validate()
        assert response.status_code == status, (path, method, response.text[:300])
