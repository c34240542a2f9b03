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


def hint(html: str) -> str:
    """What the list says beside the search box about what it looked at."""
    found = re.search(r'<p class="help" id="q-hint"[^>]*>(.*?)</p>', folded(html))
    assert found, "no search hint slot"
    return found.group(1)


def test_a_search_in_a_workflow_without_search_fields_says_what_it_looked_at(operator_client, runs):
    """A workflow that declares no search field is never found by a value: "0 runs
    match" alone read as "no such run"; the page says why, beside the search box."""
    engine.submit_run(workflow="pure-chain", input={})
    html = operator_client.get("/runs/?q=301&workflow=pure-chain").content.decode()
    assert listed(html) == [] and "0 runs match" in folded(html)
    assert hint(html) == (
        "pure-chain declares no search fields, so “301” was looked for in run ids, "
        "claim keys and submission keys only."
    )
    assert 'aria-describedby="q-hint"' in folded(html)

    html = operator_client.get("/runs/?q=301&workflow=merge-change").content.decode()
    assert listed(html) == [str(runs["merge"].id)]
    assert hint(html) == (
        "“301” was looked for in run ids, claim keys and submission keys, and in "
        "merge-change&#x27;s search fields: change_id."
    )


def test_a_search_of_every_workflow_names_the_fields_and_who_declares_them(operator_client, runs):
    said = hint(operator_client.get("/runs/?q=301").content.decode())
    assert said.startswith(
        "“301” was looked for in run ids, claim keys and submission keys, and in the search fields "
    )
    assert "change_id (merge-change, merge-change-probed)" in said
    assert "amount (charge-payment)" in said and "order (search-order)" in said
    assert said.endswith("Other workflows declare none.")
    # No search, or a whole run id (only that run is looked up): nothing to say.
    assert 'id="q-hint" aria-live="polite" hidden' in folded(operator_client.get("/runs/").content)
    whole = operator_client.get(f"/runs/?q={runs['merge'].id}").content.decode()
    assert hint(whole) == ""


def test_the_htmx_answer_to_a_search_brings_the_hint_out_of_band(operator_client, runs):
    html = operator_client.get(
        "/runs/?q=301&workflow=pure-chain", HTTP_HX_REQUEST="true", HTTP_HX_TARGET="runs"
    ).content.decode()
    assert 'id="q-hint" aria-live="polite" hx-swap-oob="true"' in folded(html)
    assert "pure-chain declares no search fields" in html


def test_the_run_page_links_each_search_field_value_to_the_runs_with_it(operator_client, runs):
    html = folded(operator_client.get(f"/runs/{runs['merge'].id}/").content)
    assert (
        '<dt>change_id</dt><dd class="search-key"><code>301</code> · '
        '<a href="/runs/?field=change_id&amp;value=301">Runs with the same change_id</a></dd>'
    ) in html
    listed_there = operator_client.get("/runs/?field=change_id&value=301").content.decode()
    assert sorted(listed(listed_there)) == sorted([str(runs["merge"].id), str(runs["probed"].id)])
    # A workflow without search fields: no such line (and no query for it).
    plain = engine.submit_run(workflow="pure-chain", input={})
    assert "Runs with the same" not in operator_client.get(f"/runs/{plain.id}/").content.decode()
