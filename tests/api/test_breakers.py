"""The API shows each step's breaker as it applies now, read-only
(docs/api.md#breakers): the declaration, or an operator's override of it."""

from __future__ import annotations

import pytest

from runs.models import BreakerSetting
from runs.workflows import PURE, Breaker, Retry, Workflow
from tests.support.api import token_client
from tests.support.declared import declared

pytestmark = pytest.mark.django_db

guarded = Workflow("api-breaker", 1)


@guarded.step(kind=PURE, retry=Retry(max_attempts=1), breaker=Breaker(outcomes=5, within=60))
def charge(ctx):
    return None


@guarded.step(kind=PURE)
def receipt(ctx):
    return None


_workflows = declared(guarded)


def steps_of(viewer) -> dict[str, dict]:
    body = token_client(viewer).get("/api/workflows/?page_size=500").json()
    (wf,) = [w for w in body["results"] if w["name"] == "api-breaker"]
    return {s["name"]: s for s in wf["versions"][0]["steps"]}


def test_a_declared_breaker_is_shown_and_a_step_without_one_has_none(viewer):
    steps = steps_of(viewer)
    assert steps["charge"]["breaker"] == {
        "outcomes": 5,
        "within_seconds": 60.0,
        "enabled": True,
        "overridden": False,
        "declared": {"outcomes": 5, "within_seconds": 60.0},
    }
    assert "breaker" not in steps["receipt"]


def test_an_operators_override_is_what_the_api_shows_and_it_cannot_be_written_there(viewer):
    BreakerSetting.objects.create(
        workflow="api-breaker",
        step="charge",
        outcomes=2,
        within_seconds=30,
        enabled=False,
        reason="noisy",
    )
    assert steps_of(viewer)["charge"]["breaker"] == {
        "outcomes": 2,
        "within_seconds": 30.0,
        "enabled": False,
        "overridden": True,
        "declared": {"outcomes": 5, "within_seconds": 60.0},
    }
    answer = token_client(viewer).post("/api/workflows/", {}, format="json")
    assert answer.status_code == 405
