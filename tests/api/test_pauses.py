"""The pauses API (docs/api.md, "Pauses"): list, pause, resume, each refusal in the
error shape and writing nothing."""

from __future__ import annotations

import pytest

from runs import engine
from runs.models import Pause, PauseChange, Step
from runs.states import StepStatus
from tests.support.api import error_of, token_client, written


@pytest.fixture
def api(operator):
    return token_client(operator)


def test_pause_list_and_resume(api):
    run = engine.submit_run(workflow="merge-change", input={"change_id": 3})

    made = api.post(
        "/api/pauses/",
        {"workflow": "merge-change", "step": "merge", "reason": "code host down"},
        format="json",
    )

    assert made.status_code == 201, made.content
    body = made.json()
    pause = Pause.objects.get()
    assert body == {
        "id": pause.id,
        "workflow": "merge-change",
        "step": "merge",
        "actor": "olivia",
        "reason": "code host down",
        "created_at": body["created_at"],
    }
    listed = api.get("/api/pauses/").json()
    assert [p["id"] for p in listed["results"]] == [pause.id]

    # The merge's delivery came while paused and was turned away: the resume sends it.
    assert engine.execute_step(step_id=Step.objects.get(run=run).id, worker="t") == "skipped"

    resumed = api.post(f"/api/pauses/{pause.id}/resume/", {"reason": "back"}, format="json")

    assert resumed.status_code == 200, resumed.content
    answer = resumed.json()
    merge = Step.objects.get(run=run)
    assert {k: answer[k] for k in ("id", "workflow", "step", "resumed_by", "reason")} == {
        "id": pause.id,
        "workflow": "merge-change",
        "step": "merge",
        "resumed_by": "olivia",
        "reason": "back",
    }
    assert answer["republished"] == 1 and merge.status == StepStatus.QUEUED
    assert Pause.objects.count() == 0
    assert list(PauseChange.objects.order_by("id").values_list("action", "actor")) == [
        ("pause", "olivia"),
        ("resume", "olivia"),
    ]


def test_a_whole_workflow_pause_leaves_out_the_step(api):
    made = api.post("/api/pauses/", {"workflow": "merge-change", "reason": "all"}, format="json")
    assert made.status_code == 201
    assert made.json()["step"] == ""


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        ({"workflow": "merge-change"}, 400, "invalid", "reason"),
        ({"workflow": "merge-change", "reason": "   "}, 400, "invalid", "reason"),
        ({"workflow": "nope", "reason": "r"}, 400, "unknown_workflow", "workflow"),
        ({"workflow": "merge-change", "step": "mreg", "reason": "r"}, 400, "unknown_step", "step"),
        ({"workflow": "merge-change", "reason": "r", "why": "typo"}, 400, "invalid", "why"),
    ],
)
def test_a_bad_pause_is_refused_in_the_error_shape_and_writes_nothing(
    api, body, status, code, field
):
    before = written()
    error = error_of(api.post("/api/pauses/", body, format="json"), status, code)
    assert field in error["fields"]
    assert written() == before


def test_pausing_twice_answers_409_already_paused(api):
    engine.pause(workflow="merge-change", step="merge", actor="ann", reason="first")
    before = written()
    error = error_of(
        api.post(
            "/api/pauses/",
            {"workflow": "merge-change", "step": "merge", "reason": "r"},
            format="json",
        ),
        409,
        "already_paused",
    )
    assert "by ann" in error["message"] and "first" in error["message"]
    assert written() == before


def test_resuming_what_is_not_paused_answers_409_not_paused(api):
    pause = engine.pause(workflow="merge-change", actor="ann", reason="r")
    engine.resume(pause_id=pause.id, actor="ann", reason="r")
    before = written()
    error_of(
        api.post(f"/api/pauses/{pause.id}/resume/", {"reason": "again"}, format="json"),
        409,
        "not_paused",
    )
    error_of(
        api.post("/api/pauses/999999/resume/", {"reason": "x"}, format="json"), 409, "not_paused"
    )
    assert written() == before


def test_a_resume_needs_a_reason(api):
    pause = engine.pause(workflow="merge-change", actor="ann", reason="r")
    before = written()
    error = error_of(api.post(f"/api/pauses/{pause.id}/resume/", {}, format="json"), 400, "invalid")
    assert list(error["fields"]) == ["reason"]
    assert written() == before
