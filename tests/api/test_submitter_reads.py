"""What a submitter (a service account) reads: its own runs, nothing of other
principals' runs (their inputs, operators' notes and names). Viewers and operators read
every run. An unknown and a forbidden run look the same: 404."""

from __future__ import annotations

import pytest

from tests.conftest import make_user
from tests.support.api import error_of, token_client

pytestmark = pytest.mark.django_db


def _submit(user) -> str:
    response = token_client(user).post(
        "/api/runs/", {"workflow": "pure-chain", "input": {}}, format="json"
    )
    assert response.status_code == 201
    return str(response.json()["id"])


def test_a_submitter_lists_and_reads_only_its_own_runs(submitter, operator, viewer):
    mine = _submit(submitter)
    theirs = _submit(operator)
    other = _submit(make_user("mallory", "submitters"))
    api = token_client(submitter)

    listed = [r["id"] for r in api.get("/api/runs/").json()["results"]]
    assert listed == [mine]
    assert api.get(f"/api/runs/{mine}/").status_code == 200
    for run_id in (theirs, other):
        for tail in ("", "steps/", "events/"):
            error_of(api.get(f"/api/runs/{run_id}/{tail}"), 404, "not_found")

    for reader in (operator, viewer):
        seen = {r["id"] for r in token_client(reader).get("/api/runs/").json()["results"]}
        assert seen == {mine, theirs, other}
