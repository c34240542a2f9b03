"""GET /api/runs/?field=…&value=… (docs/api.md#finding-a-run-by-a-search-field): the
runs whose declared search field has that value, exactly; `value` alone finds it in any
declared field, `field` alone filters nothing (the schema declares each half optional, so
each alone is a request the server must answer); a field nobody declares answers 400
naming the parameter; other unknown parameters are ignored, as before."""

from __future__ import annotations

import pytest

from runs import engine
from tests.support.api import error_of, token_client


@pytest.fixture
def api(operator):
    return token_client(operator)


@pytest.fixture
def runs(db):
    return {
        "merge": engine.submit_run(workflow="merge-change", input={"change_id": 301}),
        "other": engine.submit_run(workflow="merge-change", input={"change_id": 302}),
        "probed": engine.submit_run(workflow="merge-change-probed", input={"change_id": 301}),
        "charge": engine.submit_run(workflow="charge-payment", input={"amount": 301}),
    }


def ids(response) -> list[str]:
    assert response.status_code == 200, response.content[:300]
    return [r["id"] for r in response.json()["results"]]


def test_the_filter_returns_exactly_the_matching_runs_newest_first(api, runs):
    found = ids(api.get("/api/runs/?field=change_id&value=301"))
    assert found == [str(runs["probed"].id), str(runs["merge"].id)]
    assert ids(api.get("/api/runs/?field=amount&value=301")) == [str(runs["charge"].id)]
    assert ids(api.get("/api/runs/?field=change_id&value=30")) == []


def test_the_count_is_the_number_of_matching_runs(api, runs):
    assert api.get("/api/runs/?field=change_id&value=301").json()["count"] == 2
    with_workflow = "field=change_id&value=301&workflow=merge-change-probed"
    assert api.get(f"/api/runs/?{with_workflow}").json()["count"] == 1
    assert api.get("/api/runs/?field=change_id&value=301&status=failed").json()["count"] == 0


def test_the_filter_combines_with_the_others_and_with_an_ordering(api, runs):
    query = "field=change_id&value=301&workflow=merge-change"
    assert ids(api.get(f"/api/runs/?{query}")) == [str(runs["merge"].id)]
    oldest = ids(api.get("/api/runs/?field=change_id&value=301&ordering=created_at"))
    assert oldest == [str(runs["merge"].id), str(runs["probed"].id)]


@pytest.mark.parametrize(
    ("query", "name", "message"),
    [
        ("field=nope&value=1", "field", '"nope" is not a valid choice.'),
        ("field=change_id&value=", "value", "may not be empty: leave the parameter out instead"),
        ("field=change_id&value=" + "9" * 201, "value", "no more than 200 characters"),
    ],
)
def test_a_bad_pair_answers_400_naming_the_parameter(api, runs, query, name, message):
    error = error_of(api.get(f"/api/runs/?{query}"), 400, "invalid")
    assert list(error["fields"]) == [name]
    assert message in error["fields"][name][0]


def test_a_value_alone_is_found_in_any_declared_field_and_a_field_alone_filters_nothing(api, runs):
    found = ids(api.get("/api/runs/?value=301"))
    assert found == [str(runs["charge"].id), str(runs["probed"].id), str(runs["merge"].id)]
    assert api.get("/api/runs/?value=301").json()["count"] == 3
    assert ids(api.get("/api/runs/?value=301&workflow=charge-payment")) == [str(runs["charge"].id)]
    assert len(ids(api.get("/api/runs/?field=change_id"))) == 4


def test_a_field_name_used_as_a_parameter_is_ignored_like_any_unknown_one(api, runs):
    """`?change_id=301` is not the filter (the schema can't list per-workflow names):
    as any parameter the API does not know, it is ignored."""
    assert len(ids(api.get("/api/runs/?change_id=301"))) == 4


def test_a_submitter_finds_only_its_own_runs_by_a_field(db, runs):
    from tests.conftest import make_user

    client = token_client(make_user("svc", "submitters"))
    assert ids(client.get("/api/runs/?field=change_id&value=301")) == []


def test_the_workflows_list_says_each_versions_search_fields(api, runs):
    answer = api.get("/api/workflows/?page_size=500").json()
    listed = {w["name"]: w["versions"][-1] for w in answer["results"]}
    assert listed["merge-change"]["search"] == ["change_id"]
    assert listed["migrate-records"]["search"] == []
