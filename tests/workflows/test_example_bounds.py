"""Every number in an example workflow's input has a maximum, published in its schema and
enforced where the input is validated: the API answers 400 naming the field, the submit
page shows the problem beside it, and nothing is written. No submitter can make an
example hold a worker (a slow host asleep for 1e9 seconds) or its memory (10**12
records) beyond its bound. And `Field(max=)` itself: checked when declared."""

from __future__ import annotations

import re

import pytest

import examples.demo
import examples.workflows
from runs.models import Run
from runs.web.forms import PREFIX
from runs.workflows import Field, Workflow, WorkflowDefinitionError, registry
from tests.support.api import error_of, token_client, written

# Every numeric field of every example (examples/workflows.py and examples/demo.py), and
# its maximum.
MAXIMA = {
    ("migrate-records", "count"): 100_000,
    ("migrate-records", "batch_size"): 1_000,
    ("merge-change", "change_id"): 2_147_483_647,
    ("charge-payment", "amount"): 1_000_000,
    ("merge-change-probed", "change_id"): 2_147_483_647,
    ("agent-refund", "ticket"): 2_147_483_647,
    ("agent-refund", "amount"): 1_000_000,
    ("merge-change-audited", "change_id"): 2_147_483_647,
    ("merge-change-slow-host", "change_id"): 2_147_483_647,
    ("merge-change-slow-host", "reply_seconds"): 30.0,
    ("merge-change-checked", "change_id"): 2_147_483_647,
}
# A valid input of each, to which the tests add one value over its maximum.
VALID = {
    "migrate-records": {"count": 3, "batch_size": 2},
    "merge-change": {"change_id": 1},
    "charge-payment": {"amount": 1},
    "merge-change-probed": {"change_id": 1},
    "agent-refund": {"ticket": 1, "amount": 1},
    "merge-change-audited": {"change_id": 1},
    "merge-change-slow-host": {"change_id": 1, "reply_seconds": 0},
    "merge-change-checked": {"change_id": 1},
}


def example_workflows() -> list[Workflow]:
    return [
        value
        for module in (examples.workflows, examples.demo)
        for value in vars(module).values()
        if isinstance(value, Workflow)
    ]


def over(maximum: float) -> float:
    return maximum + 1 if isinstance(maximum, int) else maximum + 0.5


def test_every_numeric_input_of_every_example_has_the_listed_maximum():
    found = {}
    for wf in example_workflows():
        for name, fragment in wf.input_schema()["properties"].items():
            if fragment["type"] in ("integer", "number"):
                found[(wf.name, name)] = fragment.get("maximum")
    assert found == MAXIMA
    assert {wf.name for wf in example_workflows()} == set(VALID)


@pytest.mark.parametrize(("workflow", "field"), list(MAXIMA))
def test_the_api_refuses_an_example_input_over_its_maximum_with_400_naming_the_field(
    submitter, workflow, field
):
    maximum = MAXIMA[(workflow, field)]
    value = over(maximum)
    shown = str(maximum) if isinstance(maximum, int) else f"{maximum:g}"
    before = written()

    response = token_client(submitter).post(
        "/api/runs/",
        {"workflow": workflow, "input": {**VALID[workflow], field: value}},
        format="json",
    )

    problem = f"field {field!r} must be at most {shown}, got {value!r}"
    assert error_of(response, 400, "invalid_input") == {
        "code": "invalid_input",
        "message": f"invalid input: {problem}",
        "fields": {"input": [problem]},
    }
    assert written() == before


@pytest.mark.parametrize(("workflow", "field"), list(MAXIMA))
def test_the_api_accepts_an_example_input_at_its_maximum(submitter, workflow, field):
    maximum = MAXIMA[(workflow, field)]

    response = token_client(submitter).post(
        "/api/runs/",
        {"workflow": workflow, "input": {**VALID[workflow], field: maximum}},
        format="json",
    )

    assert response.status_code == 201, response.content[:300]
    assert Run.objects.get().input[field] == maximum


def test_the_slow_hosts_reply_seconds_of_1e9_is_refused(submitter):
    """The finding: a submitter put a worker process to sleep for good."""
    response = token_client(submitter).post(
        "/api/runs/",
        {"workflow": "merge-change-slow-host", "input": {"change_id": 7, "reply_seconds": 1e9}},
        format="json",
    )

    error = error_of(response, 400, "invalid_input")
    assert error["fields"] == {
        "input": ["field 'reply_seconds' must be at most 30, got 1000000000.0"]
    }
    assert Run.objects.count() == 0


def test_the_submit_page_shows_the_maximum_and_refuses_a_count_over_it_beside_the_field(
    operator_client,
):
    page = operator_client.get("/runs/new/", {"workflow": "migrate-records"})
    html = page.content.decode()
    assert 'max="100000"' in html
    assert "at least 0; at most 100000; default 500" in html

    response = operator_client.post(
        "/runs/new/",
        {
            "workflow": "migrate-records",
            f"{PREFIX}count": "1000000000000",
            f"{PREFIX}batch_size": "50",
        },
    )

    assert response.status_code == 200
    html = response.content.decode()
    assert re.search(
        r'<div id="in-count-error"><p class="error">'
        r"field &#x27;count&#x27; must be at most 100000, got 1000000000000</p>\s*</div>",
        html,
    )
    assert Run.objects.count() == 0


# --- Field(max=) ----------------------------------------------------------------------------
def test_a_declared_max_is_validated_published_and_described():
    wf = Workflow("bounded", 1, input={"n": Field(int, min=1, max=10), "x": Field(float, max=0.5)})

    assert wf.validate_input({"n": 10, "x": 0.5}) == {"n": 10, "x": 0.5}
    with pytest.raises(Exception) as refused:
        wf.validate_input({"n": 11, "x": 0.75})
    assert refused.value.problems == [
        "field 'n' must be at most 10, got 11",
        "field 'x' must be at most 0.5, got 0.75",
    ]
    properties = wf.input_schema()["properties"]
    assert properties["n"] == {"type": "integer", "minimum": 1, "maximum": 10}
    assert properties["x"] == {"type": "number", "maximum": 0.5}
    assert wf.declared_input.describe()["n"] == {
        "type": "int",
        "required": True,
        "min": 1,
        "max": 10,
    }


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            Field(str, max=3),
            "max= needs a number type (int, float, int | None, float | None), not str",
        ),
        (Field(int, max=True), "max= must be a number"),
        (Field(int, max=float("inf")), "max= must be finite"),
        (Field(int, min=5, max=4), "min=5 is above max=4"),
        (Field(int, default=11, max=10), "default 11 is above max=10"),
    ],
)
def test_a_wrong_max_is_refused_when_declared(spec, message):
    with pytest.raises(WorkflowDefinitionError) as refused:
        Workflow("wrong", 1, input={"n": spec})
    assert str(refused.value) == f"workflow 'wrong' v1, input field 'n': {message}"


def test_the_examples_are_registered_in_the_tests():
    """tests/support/session_env.py asks for them (a deployment does not get them)."""
    assert {wf.name for wf in example_workflows()} <= {wf.name for wf in registry.all_workflows()}
