"""A run's deadline through the API (docs/api.md#deadlines): given at submission as
ISO 8601 with an offset, refused in the error shape naming `deadline`, shown read-only
as `deadline_at`."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from runs.models import Run
from tests.support.api import error_of, token_client, written

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(operator):
    return token_client(operator)


def _iso(at: datetime) -> str:
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


def test_a_submission_with_a_deadline_answers_it_as_deadline_at(api):
    deadline = (timezone.now() + timedelta(minutes=5)).replace(microsecond=0)

    response = api.post(
        "/api/runs/",
        {"workflow": "quick-one", "input": {}, "deadline": _iso(deadline)},
        format="json",
    )

    assert response.status_code == 201, response.content
    run = Run.objects.get()
    assert run.deadline_at == deadline
    assert datetime.fromisoformat(response.json()["deadline_at"]) == deadline
    shown = api.get(f"/api/runs/{run.id}/").json()
    assert datetime.fromisoformat(shown["deadline_at"]) == deadline
    (listed,) = api.get("/api/runs/").json()["results"]
    assert datetime.fromisoformat(listed["deadline_at"]) == deadline


def test_a_run_without_a_deadline_shows_null(api):
    response = api.post("/api/runs/", {"workflow": "quick-one", "input": {}}, format="json")

    assert response.status_code == 201
    assert response.json()["deadline_at"] is None


def test_the_workflows_list_says_each_versions_declared_deadline(api):
    versions = {
        w["name"]: w["versions"][0]["deadline_seconds"]
        for w in api.get("/api/workflows/?page_size=500").json()["results"]
    }
    assert (versions["deadline-order"], versions["quick-one"]) == (6.0, None)


@pytest.mark.parametrize(
    "deadline",
    [
        "2020-01-01T00:00:00Z",  # in the past
        "2030-01-01T12:00:00",  # no offset
        "tomorrow",
        1_900_000_000,
    ],
)
def test_a_deadline_in_the_past_without_an_offset_or_not_a_time_is_refused_naming_it(api, deadline):
    before = written()

    response = api.post(
        "/api/runs/", {"workflow": "quick-one", "input": {}, "deadline": deadline}, format="json"
    )

    error = error_of(response, 400, "invalid")
    assert set(error["fields"]) == {"deadline"}
    assert written() == before
