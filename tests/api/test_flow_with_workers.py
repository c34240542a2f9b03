"""The whole flow through the REST API alone, against real worker processes: a worker is
SIGKILLed after its guarded merge, an operator finds the unresolved claim in the API's
queue, resolves it, and follows the run's events until it succeeds. Exactly one merge."""

from __future__ import annotations

import signal

import pytest

from examples.models import Merge
from runs.record import events
from tests.conftest import make_user
from tests.support.api import token_client
from tests.support.waiting import wait_for

pytestmark = pytest.mark.workers


def test_api_flow_submit_crash_resolve_tail_until_succeeded(cluster):
    submitter = token_client(make_user("ci-bot", "submitters"))
    operator = token_client(make_user("olivia", "operators"))
    doomed = cluster.worker(faults="after_effect:merge")

    submitted = submitter.post(
        "/api/runs/",
        {"workflow": "merge-change", "input": {"change_id": 8}},
        format="json",
        HTTP_IDEMPOTENCY_KEY="change-8",
    )
    assert submitted.status_code == 201, submitted.content
    run_id = submitted.json()["id"]
    assert doomed.wait_exit() == -signal.SIGKILL, doomed.output()[-2000:]
    cluster.worker()
    cluster.beat()

    def unresolved() -> list[dict]:
        response = operator.get("/api/claims/?status=unresolved")
        assert response.status_code == 200
        return [c for c in response.json()["results"] if c["run_id"] == run_id]

    (claim,) = wait_for(unresolved, what="the unresolved claim", on_timeout=cluster.logs)
    assert (claim["step"], claim["cause"], claim["run_status"]) == (
        "merge",
        "worker_died",
        "needs_reconciliation",
    )
    merge = Merge.objects.get(run_id=run_id)  # what the operator sees on the code host

    resolved = operator.post(
        f"/api/claims/{claim['id']}/resolve/",
        {
            "outcome": "succeeded",
            "note": "merge visible on the code host",
            "result": {"merge_id": merge.id, "change_id": 8},
        },
        format="json",
    )
    assert resolved.status_code == 200, resolved.content
    assert resolved.json()["claim"]["resolved_by"] == "olivia"

    seen: list[dict] = []

    def tail() -> bool:
        after = seen[-1]["seq"] if seen else 0
        response = submitter.get(f"/api/runs/{run_id}/events/?after_seq={after}")
        assert response.status_code == 200
        page = response.json()
        assert [e["seq"] for e in page["results"]] == list(
            range(after + 1, page["next_after_seq"] + 1)
        )
        seen.extend(page["results"])
        return any(e["type"] == events.RUN_SUCCEEDED for e in page["results"])

    wait_for(tail, what="run_succeeded", on_timeout=cluster.logs)

    types = [e["type"] for e in seen]
    assert types[0] == events.RUN_SUBMITTED and types[-1] == events.RUN_SUCCEEDED
    assert events.CLAIM_RESOLVED in types
    assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1))
    run = submitter.get(f"/api/runs/{run_id}/").json()
    assert (run["status"], run["claims"][0]["status"]) == ("succeeded", "succeeded")
    assert Merge.objects.count() == 1
    again = submitter.post(
        "/api/runs/",
        {"workflow": "merge-change", "input": {"change_id": 8}},
        format="json",
        HTTP_IDEMPOTENCY_KEY="change-8",
    )
    assert (again.status_code, again.json()["id"]) == (200, run_id)
