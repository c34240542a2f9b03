"""Every API endpoint by every role (anonymous, no role, viewer, submitter, operator)
against the expected status (api/permissions.py). A refused request writes nothing."""

from __future__ import annotations

import pytest

from runs import engine
from runs.principals import Principal, user_principal
from tests.conftest import make_user
from tests.support import factories
from tests.support.api import token_client, written

ROLES = ["anonymous", "nobody", "viewers", "submitters", "operators"]

# (method, path template, body, expected status per role, in ROLES' order).
# {run} is an active merge-change run someone else submitted (a submitter reads only its
# own runs: another's answers 404, as an unknown run does), {own} one the caller
# submitted, {claim} an unresolved claim of another run, {pause} a pause of pure-chain.
MATRIX = [
    ("get", "/api/runs/", None, (401, 403, 200, 200, 200)),
    ("post", "/api/runs/", "submit", (401, 403, 403, 201, 201)),
    ("get", "/api/runs/{run}/", None, (401, 403, 200, 404, 200)),
    ("get", "/api/runs/{run}/steps/", None, (401, 403, 200, 404, 200)),
    ("get", "/api/runs/{run}/events/", None, (401, 403, 200, 404, 200)),
    ("get", "/api/runs/{run}/export/", None, (401, 403, 200, 404, 200)),
    ("get", "/api/runs/{own}/", None, (401, 403, 200, 200, 200)),
    ("get", "/api/runs/{own}/steps/", None, (401, 403, 200, 200, 200)),
    ("get", "/api/runs/{own}/events/", None, (401, 403, 200, 200, 200)),
    ("get", "/api/runs/{own}/export/", None, (401, 403, 200, 200, 200)),
    ("post", "/api/runs/{run}/cancel/", {"reason": "r"}, (401, 403, 403, 403, 200)),
    # {run} did not fail: an operator is let in and told so (409); the others never are.
    ("post", "/api/runs/{run}/steps/merge/retry/", None, (401, 403, 403, 403, 409)),
    ("get", "/api/claims/", None, (401, 403, 200, 403, 200)),
    ("get", "/api/claims/?status=unresolved", None, (401, 403, 200, 403, 200)),
    ("post", "/api/claims/{claim}/take/", None, (401, 403, 403, 403, 200)),
    ("post", "/api/claims/{claim}/release/", None, (401, 403, 403, 403, 200)),
    (
        "post",
        "/api/claims/{claim}/resolve/",
        {"outcome": "failed", "note": "not merged"},
        (401, 403, 403, 403, 200),
    ),
    ("get", "/api/workflows/", None, (401, 403, 200, 200, 200)),
    ("get", "/api/pauses/", None, (401, 403, 200, 403, 200)),
    (
        "post",
        "/api/pauses/",
        {"workflow": "merge-change", "step": "merge", "reason": "host down"},
        (401, 403, 403, 403, 201),
    ),
    ("post", "/api/pauses/{pause}/resume/", {"reason": "r"}, (401, 403, 403, 403, 200)),
    ("get", "/api/schema/", None, (401, 403, 200, 200, 200)),
    ("get", "/api/docs/", None, (302, 403, 200, 200, 200)),
]

CASES = [
    pytest.param(method, path, body, role, expected, id=f"{method} {path} as {role}")
    for method, path, body, statuses in MATRIX
    for role, expected in zip(ROLES, statuses, strict=True)
]


def client_for(role: str):
    if role == "anonymous":
        return token_client(None)
    return token_client(make_user("someone", None if role == "nobody" else role))


def run_of_someone():
    """A run submitted by the account client_for() makes (made before or after it)."""
    return engine.submit_run(
        workflow="merge-change",
        input={"change_id": 4},
        by=Principal(user_principal("someone"), "api-token"),
    )


@pytest.mark.parametrize(("method", "path", "body", "role", "expected"), CASES)
def test_api_permission_matrix(db, method, path, body, role, expected):
    run = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    claim = factories.crashed_merge(change_id=2)
    own = run_of_someone()
    pause = engine.pause(workflow="pure-chain", actor="ann", reason="r")
    client = client_for(role)
    if body == "submit":
        body = {"workflow": "merge-change", "input": {"change_id": 3}}
    before = written()

    response = getattr(client, method)(
        path.format(run=run.id, own=own.id, claim=claim.pk, pause=pause.id),
        body,
        format="json" if body else None,
    )

    assert response.status_code == expected, response.content[:300]
    if expected in (401, 403, 404):
        if not path.startswith("/api/docs/"):  # an HTML page: the browser's 403 page
            code = {401: "not_authenticated", 403: "permission_denied", 404: "not_found"}[expected]
            assert response.json()["error"]["code"] == code
        assert written() == before
    if expected == 401:
        assert response["WWW-Authenticate"] == "Token"
    if expected == 302:
        assert response["Location"] == f"/login/?next={path}"
