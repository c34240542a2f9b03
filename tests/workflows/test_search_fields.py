"""Search fields (docs/authoring.md#search-fields): refused at definition time unless
they name scalar fields of the input; their values as text."""

from __future__ import annotations

from typing import Optional

import pytest
from pydantic import BaseModel

from runs import engine
from runs.errors import InvalidInput
from runs.models import Event, Run, RunSearchKey
from runs.workflows import Field, Workflow, WorkflowDefinitionError, registry
from runs.workflows.search import SEARCH_VALUE_MAX


def test_declared_fields_are_kept_in_order_and_described():
    wf = Workflow("s", 1, input={"change_id": int, "repo": str}, search=["repo", "change_id"])
    assert wf.search == ("repo", "change_id")
    assert wf.describe()["search"] == ["repo", "change_id"]
    assert Workflow("none", 1, input={"a": int}).search == ()


def test_a_field_the_input_does_not_declare_is_refused_naming_the_fields():
    with pytest.raises(WorkflowDefinitionError) as refused:
        Workflow("s", 1, input={"change_id": int, "repo": str}, search=("change",))
    assert str(refused.value) == (
        "workflow 's' v1: search field 'change' is not a field of the input "
        "(its fields: change_id, repo)"
    )


@pytest.mark.parametrize(
    ("declared", "shown"),
    [
        (list[int], "list[int]"),
        (dict[str, int], "dict[str, int]"),
        (float, "float"),
        (bool, "bool"),
        (Optional[float], "float | None"),  # noqa: UP045 - as authors write it too
    ],
)
def test_a_field_that_is_not_an_int_or_a_string_is_refused(declared, shown):
    with pytest.raises(WorkflowDefinitionError) as refused:
        Workflow("s", 1, input={"x": declared}, search=("x",))
    assert str(refused.value) == (
        f"workflow 's' v1: search field 'x' is {shown}; only int and str fields "
        "(or optional ones) can be searched, as their text"
    )


def test_a_bare_string_a_duplicate_and_a_bad_name_are_refused():
    with pytest.raises(WorkflowDefinitionError, match=r"search=\('x',\)"):
        Workflow("s", 1, input={"x": int}, search="x")  # type: ignore[arg-type]
    with pytest.raises(WorkflowDefinitionError, match="names a field twice"):
        Workflow("s", 1, input={"x": int}, search=("x", "x"))
    with pytest.raises(WorkflowDefinitionError, match="is not an input field name"):
        Workflow("s", 1, input={"x": int}, search=("x-y",))


def test_a_pydantic_models_int_and_str_fields_can_be_searched():
    class Order(BaseModel):
        customer: str
        amount: int
        weight: float = 0.0

    assert Workflow("s", 1, input=Order, search=("customer", "amount")).search == (
        "customer",
        "amount",
    )
    with pytest.raises(WorkflowDefinitionError, match="search field 'weight' is number"):
        Workflow("s", 1, input=Order, search=("weight",))


def test_values_are_text_none_and_overlong_strings_give_no_key():
    wf = Workflow(
        "s",
        1,
        input={"n": int, "s": str, "o": Field(Optional[int], default=None)},  # noqa: UP045
        search=("n", "s", "o"),
    )
    assert wf.search_keys(wf.validate_input({"n": 301, "s": " A-1 ", "o": None})) == [
        ("n", "301"),
        ("s", " A-1 "),  # as given
    ]
    assert wf.search_keys(wf.validate_input({"n": -4, "s": "", "o": 7})) == [
        ("n", "-4"),
        ("o", "7"),
    ]
    long = "x" * (SEARCH_VALUE_MAX + 1)
    assert wf.search_keys(wf.validate_input({"n": 1, "s": long})) == [("n", "1")]


def test_the_registry_lists_each_field_with_the_workflows_that_declare_it():
    fields = registry.search_fields()
    assert fields["change_id"] == ["merge-change", "merge-change-probed"]
    assert fields["amount"] == ["charge-payment"]
    assert fields["ticket"] == ["agent-refund"]
    assert fields["order"] == ["search-order"]
    assert "count" not in fields  # migrate-records declares none


def test_an_int_search_value_longer_than_200_characters_is_refused_naming_the_field_and_bound(db):
    wf = Workflow("s", 1, input={"n": int, "o": Field(int | None, default=None)}, search=("n", "o"))
    biggest, smallest = 10**SEARCH_VALUE_MAX - 1, -(10 ** (SEARCH_VALUE_MAX - 1) - 1)
    assert wf.search_keys(wf.validate_input({"n": biggest, "o": smallest})) == [
        ("n", "9" * 200),
        ("o", "-" + "9" * 199),
    ]

    with pytest.raises(InvalidInput) as refused:
        wf.validate_input({"n": biggest + 1, "o": smallest - 1})

    assert refused.value.problems == [
        "field 'n' is a search field, so its text must be at most 200 characters "
        "(from -(10**199 - 1) to 10**200 - 1); got 201",
        "field 'o' is a search field, so its text must be at most 200 characters "
        "(from -(10**199 - 1) to 10**200 - 1); got 201",
    ]
    assert set(refused.value.by_field) == {"n", "o"}


def test_a_pydantic_models_overlong_int_search_value_is_refused_too():
    class Order(BaseModel):
        amount: int
        note: str = ""

    wf = Workflow("s", 1, input=Order, search=("amount",))
    with pytest.raises(InvalidInput) as refused:
        wf.validate_input({"amount": 10**200, "note": "x"})
    assert refused.value.by_field == {"amount": [refused.value.problems[0]]}
    assert refused.value.problems[0].startswith("field 'amount' is a search field")
    amount = wf.input_schema()["properties"]["amount"]
    assert (amount["minimum"], amount["maximum"]) == (-(10**199 - 1), 10**200 - 1)


def test_an_overlong_int_search_value_is_refused_at_submission_and_writes_nothing(db):
    with pytest.raises(InvalidInput, match="field 'change_id' is a search field"):
        engine.submit_run(workflow="merge-change", input={"change_id": 10**200})
    assert (Run.objects.count(), RunSearchKey.objects.count(), Event.objects.count()) == (0, 0, 0)


def test_the_input_schema_says_the_bound_of_an_int_search_field():
    merge = registry.get("merge-change", 1).input_schema()["properties"]["change_id"]
    # Its own bounds stay where they are tighter (min=1, max=examples.fakes.MAX_ID).
    assert (merge["minimum"], merge["maximum"]) == (1, 2_147_483_647)
    order = registry.get("search-order", 1).input_schema()["properties"]["customer"]
    assert (order["minimum"], order["maximum"]) == (-(10**199 - 1), 10**200 - 1)
    assert "search field" in order["description"]
