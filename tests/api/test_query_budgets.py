"""The API's run answers cost a fixed number of queries, whatever the size of the run:
`POST /api/runs/` (the busiest endpoint under load, bench/load.py) and `GET
/api/runs/<id>/` answer with the run's detail (runs/reads/summaries.py run_detail), which reads
the run's steps, top-level and batches, in one query and its step claims once (they
were read twice, once for run_summary and again with their ids). How long they take
under load is measured by bench/load.py, not asserted here.
"""

from __future__ import annotations

import pytest

from runs import engine
from runs.models import Claim
from tests.conftest import make_user
from tests.support.api import token_client
from tests.support.factories import crashed, run_queued

# Every request with a token: the token (with its user) and the user's role (its groups).
AUTH = 2

# A submission, in its transaction (BEGIN and COMMIT counted): the key inserted with the
# run, the run, its first step, the step marked queued, and the engine's prepared
# statements around the message of the step; then its detail, as below.
SUBMIT = 10
# The run's detail: the run, its steps (top-level and batches: one query), its step
# claims and its map items counted.
DETAIL = 4


def submit(client, key: str, count: int = 4):
    body = {"workflow": "migrate-records", "input": {"count": count, "batch_size": 2}}
    return client.post("/api/runs/", body, format="json", HTTP_IDEMPOTENCY_KEY=key)


def test_a_submission_makes_the_same_queries_first_and_repeated(
    transactional_db, django_assert_num_queries
):
    client = token_client(make_user("ci-bot", "submitters"))
    with django_assert_num_queries(AUTH + SUBMIT + DETAIL, info="POST /api/runs/"):
        first = submit(client, "order-1")
    assert first.status_code == 201, first.content
    repeated = submit(client, "order-1")
    assert repeated.status_code == 200 and repeated.json()["id"] == first.json()["id"]


@pytest.mark.parametrize("items", [4, 60])
def test_a_runs_detail_makes_the_same_queries_whatever_its_size(
    db, django_assert_num_queries, items
):
    """2 batches, or 30; with a claim of a step (a merge whose worker died) the same."""
    client = token_client(make_user("olivia", "operators"))
    run = engine.submit_run(workflow="migrate-records", input={"count": items, "batch_size": 2})
    run_queued(run)
    merge = crashed("merge-change")[0].run
    for run_id in (run.id, merge.id):
        with django_assert_num_queries(AUTH + DETAIL, info=f"GET /api/runs/{run_id}/"):
            response = client.get(f"/api/runs/{run_id}/")
        assert response.status_code == 200
    body = client.get(f"/api/runs/{run.id}/").json()
    (mapped,) = [s for s in body["steps"] if s["name"] == "migrate"]
    assert [b["key"] for b in mapped["batches"]] == [f"migrate[{i}]" for i in range(items // 2)]
    assert mapped["items"] == {"succeeded": items}
    claim = Claim.objects.get(run=merge, item_key__isnull=True)
    claims = client.get(f"/api/runs/{merge.id}/").json()["claims"]
    assert claims == [
        {
            "id": claim.id,
            "key": claim.key,
            "status": "unresolved",
            "step": "merge",
            "kind": "guarded",
            "item_key": None,
        }
    ]
