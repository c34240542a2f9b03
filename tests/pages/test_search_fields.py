"""The runs list by a declared search field (docs/operating.md#finding-a-run): the
filter pair (field, value) shows exactly the matching runs; the search box finds a run
by any field's value and says what matched; a field nobody declares is refused beside
its field and changes nothing."""

from __future__ import annotations

import re

import pytest

from runs import engine
from runs.models import Run
from tests.support.markup import folded


@pytest.fixture
def runs(db):
    return {
        "merge": engine.submit_run(workflow="merge-change", input={"change_id": 301}),
        "other": engine.submit_run(workflow="merge-change", input={"change_id": 302}),
        "probed": engine.submit_run(workflow="merge-change-probed", input={"change_id": 301}),
        "charge": engine.submit_run(workflow="charge-payment", input={"amount": 301}),
        "order": engine.submit_run(workflow="search-order", input={"order": "A-17", "note": "x"}),
    }


def listed(html: str) -> list[str]:
    """The run ids the list links to, in order."""
    return re.findall(r'href="/runs/([0-9a-f-]{36})/"', html)


def test_the_filter_shows_exactly_the_runs_with_that_value(operator_client, runs):
    response = operator_client.get("/runs/?field=change_id&value=301")
    assert response.status_code == 200
    html = folded(response.content)
    assert listed(html) == [str(runs["probed"].id), str(runs["merge"].id)]
    assert "2 runs match" in html
    option = '<option value="change_id" selected>change_id (merge-change, merge-change-probed)'
    assert option in html
    with_workflow = operator_client.get("/runs/?field=change_id&value=301&workflow=merge-change")
    assert listed(with_workflow.content.decode()) == [str(runs["merge"].id)]
    assert "1 run matches" in folded(with_workflow.content)  # counted from the keys
    none = operator_client.get("/runs/?field=change_id&value=301&status=failed").content
    assert listed(none.decode()) == [] and "0 runs match" in folded(none)  # and the runs


def test_a_field_without_a_value_filters_nothing(operator_client, runs):
    html = operator_client.get("/runs/?field=change_id").content.decode()
    assert len(listed(html)) == 5
    assert ">Clear</a>" not in html


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("field=nope&value=1", "unknown search field &#x27;nope&#x27; (the search fields: "),
        ("value=301", "choose the search field this value is of"),
    ],
)
def test_a_bad_pair_is_refused_beside_the_field_and_filters_nothing(
    operator_client, runs, query, error
):
    response = operator_client.get(f"/runs/?{query}")
    assert response.status_code == 400
    html = response.content.decode()
    assert re.search(r'<p class="error" id="field-error"[^>]*>' + re.escape(error), html), html
    assert len(listed(html)) == 5


def test_a_field_name_as_a_parameter_is_ignored_as_before(operator_client, runs):
    assert len(listed(operator_client.get("/runs/?change_id=301").content.decode())) == 5


def test_the_search_box_finds_runs_by_any_fields_value_and_says_what_matched(operator_client, runs):
    html = operator_client.get("/runs/?q=301").content.decode()
    assert sorted(listed(html)) == sorted(
        str(runs[name].id) for name in ("merge", "probed", "charge")
    )
    assert "matched change_id = 301 (merge-change)" in html
    assert "matched change_id = 301 (merge-change-probed)" in html
    assert "matched amount = 301 (charge-payment)" in html
    found = operator_client.get("/runs/?q=A-17").content.decode()
    assert listed(found) == [str(runs["order"].id)]
    assert "matched order = A-17 (search-order)" in found
    assert listed(operator_client.get("/runs/?q=30").content.decode()) == []


def test_a_run_found_by_its_key_says_so_first(operator_client, db):
    run = engine.submit(workflow="merge-change", input={"change_id": 77}, key="77").run
    html = operator_client.get("/runs/?q=77").content.decode()
    assert listed(html) == [str(run.id)]
    assert "matched its submission key" in html


def test_the_new_run_form_refuses_an_int_search_field_over_200_digits_beside_it(operator_client):
    response = operator_client.post(
        "/runs/new/",
        {"workflow": "merge-change", "version": "1", "input.change_id": "9" * 201},
    )

    assert response.status_code == 200  # the form again, with its problem beside the field
    page = response.content.decode()
    beside = re.search(r'<div id="in-change-id-error"><p class="error">(.*?)</p>', page)
    assert beside is not None
    assert beside.group(1) == (
        "field &#x27;change_id&#x27; is a search field, so its text must be at most 200 "
        "characters (from -(10**199 - 1) to 10**200 - 1); got 201"
    )
    assert 'aria-invalid="true"' in page and 'value="' + "9" * 201 + '"' in page
    assert Run.objects.count() == 0
