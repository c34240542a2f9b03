"""The batches resource (docs/api.md, "Batches"): operators start, preview and follow
bulk operations; everyone else is refused; bad input answers 400 naming the field and
writes nothing."""

from __future__ import annotations

import pytest
from django.http import QueryDict

from runs.batches import service
from runs.models import Batch, BatchItem
from tests.conftest import make_user
from tests.support.api import error_of, token_client, written
from tests.support.batches import active_runs, failed_runs


@pytest.fixture
def api(operator):
    return token_client(operator)


def test_an_operator_starts_a_batch_and_follows_it(api, monkeypatch):
    runs = active_runs(2)
    finished = failed_runs(monkeypatch, 1)

    response = api.post(
        "/api/batches/",
        {"operation": "cancel", "filter": {"workflow": "pure-chain"}, "reason": "wrong input"},
        format="json",
    )

    assert response.status_code == 202, response.content
    body = response.json()
    batch = Batch.objects.get()
    assert response["Location"] == f"http://testserver/api/batches/{batch.id}/"
    assert body == {
        "id": batch.id,
        "operation": "cancel",
        "status": "pending",
        "filter": "workflow=pure-chain",
        "outcome": "",
        "reason": "wrong input",
        "created_by": "olivia",
        "created_at": body["created_at"],
        "started_at": None,
        "finished_at": None,
        "counts": {
            "total": 2,
            "done": 0,
            "applied": 0,
            "refused": 0,
            "failed": 0,
            "set_aside": 0,
        },
        "links": {
            "self": f"http://testserver/api/batches/{batch.id}/",
            "items": f"http://testserver/api/batches/{batch.id}/items/",
            "page": f"http://testserver/runs/batches/{batch.id}/",
        },
    }
    assert finished[0].id not in set(BatchItem.objects.values_list("run_id", flat=True))

    service.process(batch.id)

    progress = api.get(f"/api/batches/{batch.id}/").json()
    assert progress["status"] == "succeeded"
    assert progress["counts"] == {
        "total": 2,
        "done": 2,
        "applied": 2,
        "refused": 0,
        "failed": 0,
        "set_aside": 0,
    }
    listed = api.get("/api/batches/").json()
    assert listed["count"] == 1 and listed["results"][0]["id"] == batch.id
    items = api.get(f"/api/batches/{batch.id}/items/").json()["results"]
    assert sorted(i["run_id"] for i in items) == sorted(str(r.id) for r in runs)
    assert {(i["status"], i["message"]) for i in items} == {("applied", "cancelled")}


def test_preview_answers_what_a_batch_would_do_and_writes_nothing(api, monkeypatch):
    failed_runs(monkeypatch, 2)
    active_runs(1)
    before = written()

    response = api.post("/api/batches/preview/", {"operation": "retry"}, format="json")

    assert response.status_code == 200, response.content
    body = response.json()
    assert written() == before and not Batch.objects.exists()
    assert (body["matched"], body["capped"], body["applies"], body["refused"]) == (3, False, 2, 1)
    assert body["refusals"] == [
        {"why": "still pending: only a failed run's steps are retried", "count": 1}
    ]
    assert len(body["sample"]) == 2 and body["sample_rest"] == 0
    [step] = body["sample"][0]["steps"]
    assert step["key"] == "call_service" and step["kind"] == "idempotent"
    assert step["retry_key"].startswith("the same key ")


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"operation": "erase", "reason": "r"}, "operation"),
        ({"operation": "cancel"}, "reason"),
        ({"operation": "cancel", "reason": "  "}, "reason"),
        ({"operation": "cancel", "reason": "r", "filter": {"status": "bogus"}}, "filter.status"),
        ({"operation": "cancel", "reason": "r", "filter": {"status": ""}}, "filter.status"),
        (
            {"operation": "cancel", "reason": "r", "filter": {"created_after": "someday"}},
            "filter.created_after",
        ),
        ({"operation": "cancel", "reason": "r", "filter": {"q": 0}}, "filter.q"),
        ({"operation": "cancel", "reason": "r", "filter": {"field": "nope"}}, "filter.field"),
        ({"operation": "cancel", "reason": "r", "filter": {"value": "301"}}, "filter.field"),
        ({"operation": "cancel", "reason": "r", "filter": {"workflow": 0}}, "filter.workflow"),
    ],
)
def test_bad_input_answers_400_naming_the_field_and_creates_nothing(api, body, field):
    active_runs(1)
    before = written()

    error = error_of(api.post("/api/batches/", body, format="json"), 400, "invalid")

    assert field in error["fields"], error
    assert written() == before and not Batch.objects.exists()


def test_a_filter_that_matches_no_run_is_a_conflict_not_bad_input(api):
    """A well-formed filter is a valid request: what it matches is the database's state
    (409, as the schema says), not a fault of the body (400)."""
    active_runs(1)
    before = written()
    body = {"operation": "cancel", "reason": "r", "filter": {"workflow": "nope"}}

    error = error_of(api.post("/api/batches/", body, format="json"), 409, "batch_selection_refused")

    assert error["fields"] == {"filter": ["no run matches this filter: nothing to do"]}
    assert written() == before and not Batch.objects.exists()


@pytest.mark.parametrize("role", ["viewers", "submitters", None])
def test_only_operators_may_start_or_preview_batches(db, role):
    active_runs(1)
    client = token_client(make_user("someone", role))
    before = written()
    body = {"operation": "cancel", "reason": "r"}
    assert client.post("/api/batches/", body, format="json").status_code == 403
    assert client.post("/api/batches/preview/", body, format="json").status_code == 403
    assert token_client(None).get("/api/batches/").status_code == 401
    assert written() == before and not Batch.objects.exists()


@pytest.mark.parametrize(
    ("role", "reads"), [("viewers", True), ("submitters", False), (None, False)]
)
def test_viewers_and_operators_read_batches(db, operator, role, reads):
    active_runs(1)
    batch = service.create_batch(operation="cancel", params=QueryDict(), actor=operator, reason="r")
    client = token_client(make_user("someone", role))
    paths = ("/api/batches/", f"/api/batches/{batch.id}/", f"/api/batches/{batch.id}/items/")

    answers = [client.get(path) for path in paths]

    if reads:
        assert [a.status_code for a in answers] == [200, 200, 200]
        assert answers[1].json()["reason"] == "r"
    else:
        for answer in answers:
            error_of(answer, 403, "permission_denied")


def test_an_unknown_batch_answers_404(api):
    error_of(api.get("/api/batches/999/"), 404, "not_found")
    error_of(api.get("/api/batches/999/items/"), 404, "not_found")
