"""GET /api/runs/{id}/export/: the run's export document (runs/record/export.py) as a download,
for viewers, operators and a submitter's own runs; 404 as GET /api/runs/{id}/ answers
it; exactly as the OpenAPI schema says."""

from __future__ import annotations

import uuid

import pytest

from runs import engine
from runs.record import export, export_shape
from runs.testing import run_inline
from tests.conftest import make_user
from tests.support.api import error_of, token_client

pytestmark = pytest.mark.django_db


def _submit(user) -> str:
    response = token_client(user).post(
        "/api/runs/", {"workflow": "pure-chain", "input": {}}, format="json"
    )
    assert response.status_code == 201
    return str(response.json()["id"])


def test_export_answers_the_document_as_an_attachment(operator):
    run = run_inline("migrate-records", input={"count": 3, "batch_size": 2})

    response = token_client(operator).get(f"/api/runs/{run.id}/export/")

    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.id}.json"'
    body = response.json()
    # In the test's one transaction the snapshot's now() is the same: the very document.
    assert body == export.build(run.id, exported_by="user:olivia")
    assert list(body) == [
        "format",
        "version",
        "exported_at",
        "exported_by",
        "run",
        "steps",
        "attempts",
        "claims",
        "registries",
        "signals",
        "history",
        "counts",
    ]
    assert (body["format"], body["version"], body["exported_by"]) == (
        "durable-runs.run-export",
        1,
        "user:olivia",
    )
    assert body["counts"]["item_claims"] == 3


def test_export_of_an_unknown_run_is_404_in_the_error_shape(viewer):
    missing = uuid.uuid4()
    error = error_of(token_client(viewer).get(f"/api/runs/{missing}/export/"), 404, "not_found")
    assert error["message"] == f"no run with id {missing}"
    error_of(token_client(viewer).get("/api/runs/not-a-uuid/export/"), 404, "not_found")


def test_a_submitter_exports_its_own_runs_only(submitter, operator, viewer):
    mine = _submit(submitter)
    theirs = _submit(operator)
    other = _submit(make_user("mallory", "submitters"))
    api = token_client(submitter)

    response = api.get(f"/api/runs/{mine}/export/")
    assert response.status_code == 200
    assert response.json()["exported_by"] == "user:sam"
    for run_id in (theirs, other):
        # What GET /api/runs/{id}/ answers it for another's run: 404, as for none.
        error_of(api.get(f"/api/runs/{run_id}/"), 404, "not_found")
        error_of(api.get(f"/api/runs/{run_id}/export/"), 404, "not_found")
    for reader in (operator, viewer):
        for run_id in (mine, theirs, other):
            assert token_client(reader).get(f"/api/runs/{run_id}/export/").status_code == 200


def test_export_needs_a_role_and_a_login(nobody):
    run = engine.submit_run(workflow="pure-chain", input={})
    error_of(token_client(nobody).get(f"/api/runs/{run.id}/export/"), 403, "permission_denied")
    error_of(token_client(None).get(f"/api/runs/{run.id}/export/"), 401, "not_authenticated")


def test_export_is_read_only(operator):
    run = engine.submit_run(workflow="pure-chain", input={})
    error_of(
        token_client(operator).post(f"/api/runs/{run.id}/export/", {}, format="json"),
        405,
        "method_not_allowed",
    )


def test_the_schema_describes_the_export_and_its_download_header(operator):
    openapi = token_client(operator).get("/api/schema/").json()
    op = openapi["paths"]["/api/runs/{run_id}/export/"]["get"]
    assert op["operationId"] == "runs_export"
    assert sorted(op["responses"]) == ["200", "401", "403", "404", "406", "429"]
    ok = op["responses"]["200"]
    assert ok["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/RunExport"}
    assert ok["headers"]["Content-Disposition"]["schema"]["pattern"] == (
        r'^attachment; filename="run-[0-9a-f-]{36}\.json"$'
    )
    document = openapi["components"]["schemas"]["RunExport"]
    assert sorted(document["required"]) == sorted(
        [
            "format",
            "version",
            "exported_at",
            "exported_by",
            "run",
            "steps",
            "attempts",
            "claims",
            "registries",
            "signals",
            "history",
            "counts",
        ]
    )
    schemas = openapi["components"]["schemas"]
    assert document["properties"]["version"]["allOf"] == [
        {"$ref": "#/components/schemas/RunExportVersionEnum"}
    ]
    assert schemas["RunExportVersionEnum"] == {
        "enum": [1],
        "type": "integer",
        "description": "* `1` - 1",
    }
    assert document["properties"]["format"] == {"$ref": "#/components/schemas/RunExportFormatEnum"}
    assert schemas["RunExportFormatEnum"]["enum"] == ["durable-runs.run-export"]


def test_the_schema_of_the_document_is_made_from_its_one_description(operator):
    """Each section's component lists the fields of its model in runs/record/export_shape.py,
    none more, none less, and the same ones are required."""
    schemas = token_client(operator).get("/api/schema/").json()["components"]["schemas"]
    models = {"RunExport": export_shape.RunExport} | {
        name: getattr(export_shape, name)
        for name in dir(export_shape)
        if name.startswith("Export") and name in schemas
    }
    assert len(models) == 12
    for component, model in models.items():
        said = schemas[component]
        assert set(said["properties"]) == set(model.model_fields), component
        assert set(said["required"]) == set(model.model_fields), component
