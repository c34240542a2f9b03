"""Typed input: a pydantic model validates a workflow's input, the API publishes
its schema, and the runs page's submit form is generated from that schema."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from runs import engine
from runs.errors import InvalidInput
from runs.models import Run
from runs.web.forms import fields_from_schema
from runs.workflows import Workflow, WorkflowDefinitionError, registry

pytestmark = pytest.mark.django_db


def problems_of(data):
    with pytest.raises(InvalidInput) as caught:
        registry.get("typed-order", 1).validate_input(data)
    return caught.value


def test_a_model_fills_defaults_and_stores_plain_json():
    run = engine.submit_run(workflow="typed-order", input={"customer": "ann", "amount": 3})
    assert run.input == {
        "customer": "ann",
        "amount": 3,
        "currency": "EUR",
        "express": False,
        "note": None,
        "address": None,
    }


def test_each_problem_names_its_field_path():
    exc = problems_of(
        {"amount": 0, "currency": "GBP", "address": {"city": "x", "zip": "1"}, "x": 1}
    )
    text = "; ".join(exc.problems)
    assert "missing field 'customer'" in text
    assert "field 'amount': Input should be greater than 0" in text
    assert "field 'currency'" in text and "'EUR' or 'USD'" in text
    assert "field 'address.zip'" in text
    assert "unknown field 'x'" in text
    assert set(exc.by_field) == {"customer", "amount", "currency", "address", "x"}
    assert Run.objects.count() == 0


def test_only_pydantic_models_are_accepted_as_classes():
    class NotAModel:
        pass

    with pytest.raises(WorkflowDefinitionError, match="pydantic model"):
        Workflow("bad-typed", version=1, input=NotAModel)


def test_the_api_publishes_the_models_schema(operator_client):
    # The test workflows fill more than one default page: ask for the largest.
    body = operator_client.get("/api/workflows/?page_size=200").json()
    entries = body["results"] if isinstance(body, dict) and "results" in body else body
    typed = next(w for w in entries if w["name"] == "typed-order")
    schema = typed["versions"][0]["input_schema"] if "versions" in typed else typed["input_schema"]
    assert schema["required"] == ["customer", "amount"]
    assert schema["properties"]["currency"]["enum"] == ["EUR", "USD"]


def test_the_api_refuses_bad_typed_input_naming_the_field(operator_client):
    response = operator_client.post(
        "/api/runs/",
        {"workflow": "typed-order", "input": {"customer": "ann", "amount": -2}},
        content_type="application/json",
    )
    assert response.status_code == 400
    assert "field 'amount'" in response.content.decode()
    assert Run.objects.count() == 0


def test_fields_follow_the_schema():
    fields = {f.name: f for f in fields_from_schema(registry.get("typed-order", 1).input_schema())}
    assert fields["customer"].widget == "text" and fields["customer"].required
    assert fields["customer"].description == "who pays"
    assert fields["amount"].widget == "integer" and fields["amount"].required
    assert fields["currency"].widget == "select" and fields["currency"].choices == ["EUR", "USD"]
    assert fields["express"].widget == "checkbox" and not fields["express"].required
    assert fields["note"].widget == "text" and fields["note"].nullable
    assert fields["address"].widget == "json"
    # A workflow declared with a field mapping gets its form the same way.
    mapped = {
        f.name: f for f in fields_from_schema(registry.latest("migrate-records").input_schema())
    }
    assert mapped["count"].widget == "integer"


def test_the_form_shows_the_workflows_fields(operator_client):
    page = operator_client.get("/runs/new/?workflow=typed-order").content.decode()
    assert 'name="input.customer"' in page and 'name="input.currency"' in page
    assert 'type="checkbox" id="in-express"' in page


def test_a_refused_form_shows_problems_beside_fields_and_submits_nothing(operator_client):
    response = operator_client.post(
        "/runs/new/",
        {
            "workflow": "typed-order",
            "version": "1",
            "input.customer": "",
            "input.amount": "12.5x",
            "input.address": "{not json",
        },
    )
    assert response.status_code == 200  # the form again, with its problems
    page = response.content.decode()
    assert "enter a whole number, not &#x27;12.5x&#x27;" in page
    assert "not valid JSON" in page
    assert Run.objects.count() == 0

    # The text parses, the workflow refuses: its own words, beside the field.
    response = operator_client.post(
        "/runs/new/", {"workflow": "typed-order", "version": "1", "input.amount": "0"}
    )
    page = response.content.decode()
    assert "missing field &#x27;customer&#x27;" in page
    assert "Input should be greater than 0" in page
    assert 'value="0"' in page  # what was typed is kept
    assert Run.objects.count() == 0


def test_a_valid_form_submits_and_opens_the_run(operator_client):
    response = operator_client.post(
        "/runs/new/",
        {
            "workflow": "typed-order",
            "version": "1",
            "input.customer": "ann",
            "input.amount": "7",
            "input.currency": '"USD"',
            "input.express": "on",
            "input.address": '{"city": "Lyon", "zip": "69001"}',
        },
    )
    run = Run.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/{run.id}/"
    assert run.input["currency"] == "USD" and run.input["express"] is True
    assert run.input["address"] == {"city": "Lyon", "zip": "69001"}


def test_viewers_cannot_submit(viewer_client):
    assert viewer_client.get("/runs/new/").status_code == 403
    response = viewer_client.post("/runs/new/", {"workflow": "charge-payment", "input.amount": "1"})
    assert response.status_code == 403
    assert "New run" not in viewer_client.get("/runs/").content.decode()
    assert Run.objects.count() == 0


def test_an_unknown_workflow_is_a_clear_error(operator_client):
    response = operator_client.get("/runs/new/?workflow=nope")
    assert response.status_code == 400
    assert "nope" in response.content.decode()


def test_a_model_without_extra_forbid_still_names_fields():
    class Loose(BaseModel):
        n: int

    wf = Workflow("loose", version=1, input=Loose)
    with pytest.raises(InvalidInput, match="field 'n'"):
        wf.validate_input({"n": "x"})
