"""Every text field of the API refuses U+0000 (PostgreSQL cannot store it), and the
schema says so (api/schema.py forbid_nul): a string the schema allows, the server
accepts. Before, `note` (claim resolve) and `reason` (batches) were refused with 400 for
a NUL the schema allowed (schemathesis: "schema-valid request rejected")."""

from __future__ import annotations

import re
from typing import Any

import pytest

from runs import engine
from tests.support import factories
from tests.support.api import error_of, token_client

NUL = "a\x00b"


@pytest.fixture
def api(operator):
    return token_client(operator)


def request_strings(openapi: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every string a request carries, by where: "<operation> <in>:<name>" for a
    parameter, "<operation> body.<a>.<b>" for a body's property (any branch of a oneOf)."""
    schemas = openapi["components"]["schemas"]
    found: dict[str, dict[str, Any]] = {}

    def walk(schema: dict[str, Any], where: str, seen: frozenset[str]) -> None:
        if "$ref" in schema:
            name = schema["$ref"].rsplit("/", 1)[-1]
            if name not in seen:
                walk(schemas[name], where, seen | {name})
            return
        for key in ("allOf", "oneOf", "anyOf"):
            for branch in schema.get(key, []):
                walk(branch, where, seen)
        if schema.get("type") == "string":
            found[where] = schema
        for name, prop in schema.get("properties", {}).items():
            walk(prop, f"{where}.{name}", seen)
        if isinstance(schema.get("items"), dict):
            walk(schema["items"], f"{where}[]", seen)

    for item in openapi["paths"].values():
        for op in item.values():
            if not isinstance(op, dict):
                continue
            for parameter in op.get("parameters", []):
                where = f"{op['operationId']} {parameter['in']}:{parameter['name']}"
                walk(parameter["schema"], where, frozenset())
            for content in op.get("requestBody", {}).get("content", {}).values():
                walk(content["schema"], f"{op['operationId']} body", frozenset())
    return found


def schema_allows(schema: dict[str, Any], value: str) -> bool:
    if "enum" in schema:
        return value in schema["enum"]
    return "pattern" not in schema or re.search(schema["pattern"], value) is not None


def test_the_schema_allows_no_nul_in_any_text_field_of_a_request(api):
    openapi = api.get("/api/schema/").json()
    strings = request_strings(openapi)

    allowing = sorted(w for w, s in strings.items() if "format" not in s and schema_allows(s, NUL))

    assert allowing == []
    # The fields named in the issue are among those checked.
    for where in (
        "claims_resolve body.note",
        "batches_create body.reason",
        "batches_create body.filter.q",
        "batches_create body.filter.value",
        "batches_create body.filter.workflow",
        "pauses_create body.reason",
        "pauses_resume body.reason",
        "runs_cancel body.reason",
        "runs_list query:workflow",
        "runs_list query:value",
        "claims_list query:workflow",
    ):
        assert where in strings, sorted(strings)


@pytest.fixture
def targets(db):
    run = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    claim = factories.crashed_merge(change_id=2)
    pause = engine.pause(workflow="merge-change", actor="olivia", reason="maintenance")
    return {"run": run.id, "claim": claim.pk, "pause": pause.id}


@pytest.mark.parametrize(
    ("method", "path", "body", "field"),
    [
        ("post", "/api/claims/{claim}/resolve/", {"outcome": "failed", "note": NUL}, "note"),
        (
            "post",
            "/api/claims/{claim}/resolve/",
            {"outcome": "failed", "note": "n", "reference": NUL},
            "reference",
        ),
        ("post", "/api/batches/", {"operation": "cancel", "reason": NUL}, "reason"),
        *(
            ("post", "/api/batches/", {"operation": "cancel", "reason": "r", "filter": f}, n)
            for f, n in (
                ({"q": NUL}, "filter.q"),
                ({"field": "change_id", "value": NUL}, "filter.value"),
                ({"workflow": NUL}, "filter.workflow"),
            )
        ),
        ("post", "/api/pauses/", {"workflow": "charge-payment", "reason": NUL}, "reason"),
        ("post", "/api/pauses/{pause}/resume/", {"reason": NUL}, "reason"),
        ("post", "/api/runs/{run}/cancel/", {"reason": NUL}, "reason"),
        ("get", "/api/runs/?workflow=a%00b", None, "workflow"),
        ("get", "/api/runs/?field=change_id&value=a%00b", None, "value"),
        ("get", "/api/claims/?workflow=a%00b", None, "workflow"),
    ],
)
def test_the_server_refuses_a_nul_in_each_text_field_naming_it(
    api, targets, method, path, body, field
):
    url = path.format(**targets)
    if method == "get":
        response = api.get(url)
    else:
        response = api.post(url, body, format="json")

    error = error_of(response, 400, "invalid")
    assert list(error["fields"]) == [field], error
