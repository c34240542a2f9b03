"""Search fields (docs/authoring.md#search-fields): refused at definition time unless
they name scalar fields of the input; their values as text."""

from __future__ import annotations

from typing import Optional

import pytest
from pydantic import BaseModel

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
