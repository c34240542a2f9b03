"""Idempotency keys are scoped to whoever submits (as payment APIs scope them per
account): the same key from two clients makes two runs, and one client can neither
squat another's keys nor learn its run ids from a refusal. Decided in the engine, so
the API, the command line and schedules share the rule."""

from __future__ import annotations

import pytest

from runs.models import Claim, Run
from runs.testing import run_inline
from tests.conftest import make_user
from tests.support.api import token_client

pytestmark = pytest.mark.django_db


def _post(user, key: str, data: dict):
    return token_client(user).post(
        "/api/runs/",
        {"workflow": "charge-payment", "input": {"amount": 5, **data}},
        format="json",
        HTTP_IDEMPOTENCY_KEY=key,
    )


def test_two_clients_with_one_key_get_a_run_each_and_see_nothing_of_the_other(submitter):
    first = _post(submitter, "order-1234", {})
    assert first.status_code == 201

    same_request = _post(make_user("mallory", "submitters"), "order-1234", {})
    assert same_request.status_code == 201, same_request.content  # a run of its own
    assert same_request.json()["id"] != first.json()["id"]

    other_request = _post(make_user("trudy", "submitters"), "order-1234", {"amount": 6})
    assert other_request.status_code == 201, other_request.content  # not a conflict
    assert first.json()["id"] not in other_request.content.decode()


def test_one_client_retrying_its_key_gets_its_run_back(submitter):
    first = _post(submitter, "order-77", {})
    again = _post(submitter, "order-77", {})
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    conflict = _post(submitter, "order-77", {"amount": 7})
    assert conflict.status_code == 409


def test_a_key_that_looks_like_a_run_id_does_not_hijack_the_search(submitter, operator, client):
    real = Run.objects.get(pk=_post(operator, "real-order", {}).json()["id"])
    prefix = str(real.id)[:8]
    squatter = Run.objects.get(pk=_post(submitter, prefix, {}).json()["id"])

    client.force_login(operator)
    page = client.get("/runs/", {"q": prefix}).content.decode()

    assert str(real.id)[:8] in page
    first = page.index(f"/runs/{real.id}/")
    assert str(squatter.id) not in page[:first]  # the id match comes first
    assert "matched the run id" in page
    # The squatter is listed too (its key is the text searched), after the real run and
    # saying why it is there.
    assert page.index(f"/runs/{squatter.id}/") > first
    assert "matched its submission key" in page


def test_a_search_by_claim_key_finds_its_run_and_says_so(operator, client):
    run = run_inline("merge-change", {"change_id": 5})
    claim = Claim.objects.get(run=run)
    other = run_inline("merge-change", {"change_id": 6})

    client.force_login(operator)
    page = client.get("/runs/", {"q": claim.key}).content.decode()

    assert f"/runs/{run.id}/" in page
    assert f"/runs/{other.id}/" not in page
    assert "matched a claim key" in page
