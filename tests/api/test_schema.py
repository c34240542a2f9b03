"""The OpenAPI schema says exactly what the server does: each bound, enum, closed body
and choice it declares is one the server enforces, with the answer the schema gives
(400 in the error shape), and what the schema allows the server accepts. Each test
reads the schema /api/schema/ serves and asks the server the same question.

tests/api/test_fuzz_live_server.py runs Schemathesis over the whole schema; these are the
disagreements it found, one by one, so that each stays fixed with a readable test.
"""

from __future__ import annotations

from typing import Any

import pytest

from runs import engine
from tests.support import factories
from tests.support.api import error_of, token_client

INT32_MAX = 2**31 - 1


@pytest.fixture
def api(operator):
    return token_client(operator)


@pytest.fixture
def openapi(api) -> dict[str, Any]:
    response = api.get("/api/schema/")
    assert response.status_code == 200
    return response.json()


def operation(openapi: dict[str, Any], operation_id: str) -> dict[str, Any]:
    for item in openapi["paths"].values():
        for op in item.values():
            if isinstance(op, dict) and op.get("operationId") == operation_id:
                return op
    raise AssertionError(f"no operation {operation_id}")


def parameter(openapi: dict[str, Any], operation_id: str, name: str) -> dict[str, Any]:
    (found,) = [p for p in operation(openapi, operation_id)["parameters"] if p["name"] == name]
    return found


def resolve(openapi: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = openapi["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    return schema


def request_body(openapi: dict[str, Any], operation_id: str) -> dict[str, Any]:
    body = operation(openapi, operation_id)["requestBody"]
    return resolve(openapi, body["content"]["application/json"]["schema"])


PAGED = ["runs_list", "runs_steps_list", "claims_list", "workflows_list"]


# --- integer bounds ----------------------------------------------------------------------
@pytest.mark.parametrize("operation_id", PAGED)
def test_page_declares_the_largest_page_the_server_reads(openapi, operation_id):
    assert parameter(openapi, operation_id, "page")["schema"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": INT32_MAX,
    }


def test_page_past_the_bound_answers_400_naming_it_and_at_the_bound_404(api):
    error = error_of(api.get(f"/api/runs/?page={INT32_MAX + 1}"), 400, "invalid")
    assert list(error["fields"]) == ["page"]
    error_of(api.get(f"/api/runs/?page={INT32_MAX}"), 404, "not_found")  # documented: no page


def test_after_seq_declares_the_largest_seq_the_server_reads(openapi, api):
    assert parameter(openapi, "runs_events_list", "after_seq")["schema"] == {
        "type": "integer",
        "minimum": 0,
        "maximum": INT32_MAX,
    }
    run = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    events = f"/api/runs/{run.id}/events/"
    error = error_of(api.get(f"{events}?after_seq={INT32_MAX + 1}"), 400, "invalid")
    assert list(error["fields"]) == ["after_seq"]
    assert api.get(f"{events}?after_seq={INT32_MAX}").json()["results"] == []


def test_version_declares_only_versions_the_server_takes(openapi, api):
    """The versions each workflow has (see the submission tests below), all within the
    server's bound; past it is a 400 naming the version."""
    body = request_body(openapi, "runs_create")
    versions = {
        v
        for branch in body_schemas(openapi, body)
        for v in branch["properties"]["version"]["enum"]
        if v is not None
    }
    assert versions and all(1 <= v <= INT32_MAX for v in versions)
    body = {"workflow": "merge-change", "version": INT32_MAX + 1, "input": {"change_id": 1}}
    error = error_of(api.post("/api/runs/", body, format="json"), 400, "invalid")
    assert list(error["fields"]) == ["version"]


def test_claim_id_declares_the_largest_id_the_path_takes(openapi, api):
    largest = 10**18 - 1  # 18 digits: always within PostgreSQL's bigint
    for operation_id in ("claims_resolve", "claims_take", "claims_release"):
        assert parameter(openapi, operation_id, "claim_id")["schema"] == {
            "type": "integer",
            "minimum": 1,
            "maximum": largest,
        }
    error = error_of(api.post(f"/api/claims/{largest}/take/"), 404, "not_found")
    assert error["message"] == f"no claim with id {largest}"


# --- empty query values ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/api/runs/", "status"),
        ("/api/runs/", "ordering"),
        ("/api/runs/", "created_after"),
        ("/api/runs/", "created_before"),
        ("/api/runs/", "page"),
        ("/api/runs/", "page_size"),
        ("/api/claims/", "status"),
        ("/api/workflows/", "page"),
        ("/api/runs/{run}/events/", "after_seq"),
        ("/api/runs/{run}/events/", "limit"),
    ],
)
def test_an_empty_value_the_schema_refuses_answers_400_naming_it(api, openapi, path, name):
    """`?status=` is no status: refused, saying to leave the parameter out, rather than
    read as "any" while the schema lists what a status may be."""
    run = engine.submit_run(workflow="merge-change", input={"change_id": 1})

    error = error_of(api.get(f"{path.format(run=run.id)}?{name}="), 400, "invalid")

    assert error["fields"] == {name: ["may not be empty: leave the parameter out instead"]}


@pytest.mark.parametrize("path", ["/api/runs/", "/api/claims/"])
def test_an_empty_workflow_filter_means_any_as_the_schema_allows(api, openapi, path):
    operation_id = "runs_list" if path == "/api/runs/" else "claims_list"
    assert "minLength" not in parameter(openapi, operation_id, "workflow")["schema"]
    factories.crashed_merge()

    assert api.get(f"{path}?workflow=").json()["count"] == 1


# --- closed request bodies ---------------------------------------------------------------
def body_schemas(openapi: dict[str, Any], schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The object schemas a body may match: the body's own, or each of its oneOf."""
    schema = resolve(openapi, schema)
    if "oneOf" in schema:
        return [s for branch in schema["oneOf"] for s in body_schemas(openapi, branch)]
    return [schema]


def test_every_request_body_is_closed(openapi):
    """The server refuses fields it does not know (a typo must not be ignored), so no
    body may allow additional properties."""
    bodies = {}
    for item in openapi["paths"].values():
        for op in item.values():
            if isinstance(op, dict) and "requestBody" in op:
                content = op["requestBody"]["content"]
                assert list(content) == ["application/json"], op["operationId"]
                bodies[op["operationId"]] = body_schemas(
                    openapi, content["application/json"]["schema"]
                )
    assert set(bodies) == {
        "runs_create",
        "runs_cancel",
        "runs_signal",
        "claims_resolve",
        "pauses_create",
        "pauses_resume",
        "batches_create",
        "batches_preview",
    }
    open_bodies = {
        name: [s.get("description") for s in schemas if s.get("additionalProperties") is not False]
        for name, schemas in bodies.items()
    }
    assert open_bodies == {name: [] for name in bodies}


def test_an_unknown_body_field_answers_400_naming_it(api):
    claim = factories.crashed_merge()
    calls = [
        ("/api/runs/", {"workflow": "merge-change", "input": {"change_id": 1}}),
        (f"/api/runs/{claim.run_id}/cancel/", {"reason": "r"}),
        (f"/api/runs/{claim.run_id}/signals/approval/", {"payload": 1}),
        (f"/api/claims/{claim.pk}/resolve/", {"outcome": "failed", "note": "n"}),
    ]
    for path, body in calls:
        error = error_of(api.post(path, {**body, "extra": 1}, format="json"), 400, "invalid")
        assert error["fields"] == {"extra": ["unknown field"]}, path


# --- resolving a claim: one body per outcome ---------------------------------------------
def test_the_resolve_body_is_one_of_two_by_outcome(openapi):
    body = request_body(openapi, "claims_resolve")
    assert body["discriminator"]["propertyName"] == "outcome"
    branches = {
        outcome: resolve(openapi, {"$ref": ref})
        for outcome, ref in body["discriminator"]["mapping"].items()
    }
    assert [{"$ref": ref} for ref in body["discriminator"]["mapping"].values()] == body["oneOf"]
    assert {
        outcome: (
            resolve(openapi, branch["properties"]["outcome"]["allOf"][0])["enum"],
            sorted(branch["properties"]),
            sorted(branch["required"]),
            branch["additionalProperties"],
        )
        for outcome, branch in branches.items()
    } == {
        "succeeded": (
            ["succeeded"],
            ["note", "outcome", "reference", "result"],
            ["note", "outcome"],
            False,
        ),
        "failed": (["failed"], ["note", "outcome", "reference"], ["note", "outcome"], False),
    }


@pytest.mark.parametrize("result", [None, {"x": 1}, 0])
def test_a_failed_outcome_with_a_result_answers_400_even_a_null_one(api, result):
    claim = factories.crashed_merge()
    body = {"outcome": "failed", "note": "not on the host", "result": result}

    error = error_of(
        api.post(f"/api/claims/{claim.pk}/resolve/", body, format="json"), 400, "invalid"
    )

    assert error["fields"] == {
        "result": ["a failed outcome has no result (the effect did not happen)"]
    }


# --- strings are strings, integers integers ------------------------------------------------
@pytest.mark.parametrize(
    ("path", "body", "field", "message"),
    [
        ("/api/runs/", {"workflow": 0}, "workflow", "Not a valid string."),
        ("/api/runs/", {"workflow": "merge-change", "version": "1"}, "version", None),
        ("/api/runs/", {"workflow": "merge-change", "version": 1.5}, "version", None),
        ("/api/runs/", {"workflow": "merge-change", "version": True}, "version", None),
        ("{run}cancel/", {"reason": 0}, "reason", "Not a valid string."),
        ("{claim}resolve/", {"outcome": "failed", "note": 0}, "note", "Not a valid string."),
        (
            "{claim}resolve/",
            {"outcome": "succeeded", "note": "n", "reference": 0},
            "reference",
            "Not a valid string.",
        ),
    ],
)
def test_a_body_value_of_another_type_answers_400_naming_it(api, path, body, field, message):
    """The schema says string or integer; the server does not read 0 as "0" or "1" as 1."""
    claim = factories.crashed_merge()
    path = path.format(run=f"/api/runs/{claim.run_id}/", claim=f"/api/claims/{claim.pk}/")

    error = error_of(api.post(path, body, format="json"), 400, "invalid")

    assert error["fields"] == {field: [message or "A valid integer is required."]}


def test_note_and_reference_declare_what_the_server_refuses(openapi, api):
    for branch in body_schemas(openapi, request_body(openapi, "claims_resolve")):
        note, reference = branch["properties"]["note"], branch["properties"]["reference"]
        # Blank once trimmed is no note, and no U+0000 anywhere (PostgreSQL cannot store
        # it): "a character neither space nor NUL somewhere, and no NUL".
        assert (note["type"], note["pattern"]) == ("string", r"^[^\x00]*[^\s\x00][^\x00]*$")
        assert (reference["type"], reference["maxLength"]) == ("string", 2000)
        assert reference["pattern"] == r"^[^\x00]*$"
    claim = factories.crashed_merge()
    padded = {"outcome": "failed", "note": "n", "reference": " " * 2001}
    error = error_of(
        api.post(f"/api/claims/{claim.pk}/resolve/", padded, format="json"), 400, "invalid"
    )
    assert list(error["fields"]) == ["reference"]


def test_a_signal_payload_postgresql_cannot_store_answers_400_not_500(api):
    run = engine.submit_run(workflow="agent-refund", input={"ticket": 1, "amount": 2})
    for payload in ("a\x00b", {"k\x00": 1}):
        body = {"payload": payload}
        response = api.post(f"/api/runs/{run.id}/signals/approval/", body, format="json")
        assert list(error_of(response, 400, "invalid")["fields"]) == ["payload"]


# --- links: where the ids an answer gives can be used --------------------------------------
RUN_OPERATIONS = {
    "runs_retrieve",
    "runs_export",
    "runs_steps_list",
    "runs_events_list",
    "runs_cancel",
    "runs_signal",
    "runs_retry_step",
}
CLAIM_OPERATIONS = {"claims_resolve", "claims_take", "claims_release"}


def links_of(openapi: dict[str, Any], operation_id: str, status: str) -> dict[str, Any]:
    links = operation(openapi, operation_id)["responses"][status].get("links", {})
    return {link["operationId"]: link["parameters"] for link in links.values()}


def test_answers_link_to_the_operations_that_take_their_ids(openapi):
    def each(operations: set[str], **parameters: str) -> dict[str, Any]:
        return {operation_id: parameters for operation_id in operations}

    assert links_of(openapi, "runs_create", "201") == each(
        RUN_OPERATIONS, run_id="$response.body#/id"
    )
    assert links_of(openapi, "runs_create", "200") == links_of(openapi, "runs_create", "201")
    assert links_of(openapi, "runs_list", "200") == each(
        RUN_OPERATIONS, run_id="$response.body#/results/0/id"
    )
    assert links_of(openapi, "runs_retrieve", "200") == {
        **each(RUN_OPERATIONS - {"runs_retrieve", "runs_retry_step"}, run_id="$response.body#/id"),
        "runs_retry_step": {"run_id": "$response.body#/id", "step": "$response.body#/steps/0/key"},
        **each(CLAIM_OPERATIONS, claim_id="$response.body#/claims/0/id"),
    }
    assert links_of(openapi, "claims_list", "200") == {
        **each(CLAIM_OPERATIONS, claim_id="$response.body#/results/0/id"),
        "runs_retrieve": {"run_id": "$response.body#/results/0/run_id"},
    }
    assert links_of(openapi, "claims_take", "200") == each(
        {"claims_release", "claims_resolve"}, claim_id="$response.body#/claim_id"
    )


def test_every_link_names_an_operation_and_some_of_its_path_parameters(openapi):
    for item in openapi["paths"].values():
        for op in item.values():
            if not isinstance(op, dict):
                continue
            for response in op["responses"].values():
                for name, link in response.get("links", {}).items():
                    target = operation(openapi, link["operationId"])
                    names = {p["name"] for p in target["parameters"] if p["in"] == "path"}
                    # A link gives what the answer knows; the rest is the caller's.
                    assert set(link["parameters"]) <= names, (op["operationId"], name)
                    assert {"run_id", "claim_id", "pause_id", "batch_id"} & set(link["parameters"])


# --- submitting: one body per registered workflow ------------------------------------------
def test_the_submission_body_is_one_of_the_registered_workflows(openapi, api):
    """A well-formed submission of a workflow this server does not know, of a version it
    does not have, or with an input its workflow refuses is not valid by the schema: the
    schema lists each workflow with its versions and its declared input, as
    GET /api/workflows/ does."""
    from runs.workflows import registry

    body = request_body(openapi, "runs_create")
    assert body["discriminator"]["propertyName"] == "workflow"
    mapping = body["discriminator"]["mapping"]
    assert set(mapping) == {wf.name for wf in registry.all_workflows()}
    assert [{"$ref": ref} for ref in mapping.values()] == body["oneOf"]
    merge = body_schemas(openapi, {"$ref": mapping["merge-change"]})
    assert merge == [
        {
            "type": "object",
            "description": "Merge a change on a code host that has no idempotency.",
            "properties": {
                "workflow": {"type": "string", "enum": ["merge-change"]},
                "version": {
                    "type": "integer",
                    "enum": [1, None],
                    "nullable": True,
                    "description": "1, the latest; omitted or null: the latest.",
                },
                "input": {
                    "title": "merge-change v1 input",
                    "type": "object",
                    "properties": {
                        "change_id": {
                            "type": "integer",
                            "minimum": 1,
                            # its own maximum (examples.fakes.MAX_ID), tighter than a
                            # search field's (its text fits its key)
                            "maximum": 2_147_483_647,
                            "description": "a search field: at most 200 digits (199 when negative)",
                        }
                    },
                    "required": ["change_id"],
                    "additionalProperties": False,
                    "description": "The run's input (GET /api/workflows/ gives it as JSON "
                    "Schema too).",
                },
            },
            "required": ["workflow", "input"],
            "additionalProperties": False,
        }
    ]


@pytest.fixture
def two_versions():
    """A workflow with two versions, registered for one test."""
    from runs.workflows import PURE, registry, workflow

    versions = [
        workflow("schema-two-versions", version=1, input={"a": int}),
        workflow("schema-two-versions", version=2, input={"b": float | None}),
    ]
    for wf in versions:
        wf.step(kind=PURE)(lambda ctx: None)
    yield
    for wf in versions:
        registry.unregister(wf)


def test_each_version_of_a_workflow_has_its_body(two_versions, api):
    openapi = api.get("/api/schema/").json()
    mapping = request_body(openapi, "runs_create")["discriminator"]["mapping"]
    v1, v2 = body_schemas(openapi, {"$ref": mapping["schema-two-versions"]})
    assert (v1["properties"]["version"], v1["required"]) == (
        {"type": "integer", "enum": [1]},
        ["workflow", "version", "input"],
    )
    assert v1["properties"]["input"]["properties"] == {"a": {"type": "integer"}}
    # The latest: its version, or none (omitted or null).
    assert (v2["properties"]["version"]["enum"], v2["required"]) == (
        [2, None],
        ["workflow", "input"],
    )
    assert v2["properties"]["input"]["properties"] == {"b": {"type": "number", "nullable": True}}


def test_a_body_the_server_needs_is_a_required_body(openapi, api):
    claim = factories.crashed_merge()
    paths = {
        "runs_create": "/api/runs/",
        "runs_cancel": f"/api/runs/{claim.run_id}/cancel/",
        "runs_signal": f"/api/runs/{claim.run_id}/signals/approval/",
        "claims_resolve": f"/api/claims/{claim.pk}/resolve/",
    }
    required = {
        operation_id: operation(openapi, operation_id)["requestBody"].get("required", False)
        for operation_id in paths
    }
    answers_without_a_body = {
        operation_id: api.post(path).status_code == 400 for operation_id, path in paths.items()
    }
    assert (
        required
        == answers_without_a_body
        == {
            "runs_create": True,
            "runs_cancel": False,
            "runs_signal": False,
            "claims_resolve": True,
        }
    )
