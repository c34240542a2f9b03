"""Cancel and retry on the run page: operators only, confirmed, done by the engine."""

from __future__ import annotations

import pytest

from runs import engine
from runs.models import Event, Run, Step
from runs.record import events
from runs.states import RunStatus, StepStatus
from tests.support.factories import run_queued

HTMX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def running(db) -> Run:
    return engine.submit_run(workflow="pure-chain", input={})


@pytest.fixture
def failed(db) -> Run:
    run = engine.submit_run(workflow="fork-fail", input={})
    run_queued(run)
    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    return run


def test_operator_sees_cancel_for_an_active_run_and_retry_for_a_failed_one(
    operator_client, running, failed
):
    page = operator_client.get(f"/runs/{running.id}/").content.decode()
    assert "Cancel run…" in page and "Retry failed" not in page
    page = operator_client.get(f"/runs/{failed.id}/").content.decode()
    assert "Retry failed step…" in page and "Cancel run…" not in page


def test_viewer_sees_no_operation_and_is_refused_when_posting(viewer_client, running, failed):
    assert "Cancel run…" not in viewer_client.get(f"/runs/{running.id}/").content.decode()
    assert "Retry failed" not in viewer_client.get(f"/runs/{failed.id}/").content.decode()
    assert viewer_client.post(f"/runs/{running.id}/cancel/", **HTMX).status_code == 403
    assert (
        viewer_client.post(f"/runs/{failed.id}/retry/", {"step": "doomed_branch"}).status_code
        == 403
    )
    assert viewer_client.get(f"/runs/{failed.id}/retry/preview/?step=x").status_code == 403
    assert Run.objects.get(pk=running.id).status == RunStatus.PENDING
    assert Run.objects.get(pk=failed.id).status == RunStatus.FAILED


def test_cancel_from_the_page_records_who_and_why(operator_client, running):
    response = operator_client.post(
        f"/runs/{running.id}/cancel/", {"reason": "wrong change"}, **HTMX
    )
    assert response.status_code == 200 and response["HX-Refresh"] == "true"
    running.refresh_from_db()
    assert (running.status, running.error) == (
        RunStatus.CANCELLED,
        "cancelled by olivia: wrong change",
    )
    event = Event.objects.get(run=running, type=events.RUN_CANCELLED)
    assert event.payload["actor"] == "olivia"
    page = operator_client.get(f"/runs/{running.id}/").content.decode()
    assert "Run cancelled: no new step will start" in page


def test_cancel_of_a_finished_run_says_so(operator_client, failed):
    operator_client.post(f"/runs/{failed.id}/cancel/", **HTMX)
    page = operator_client.get(f"/runs/{failed.id}/").content.decode()
    assert "is already failed; it cannot be cancelled" in page


def test_retry_preview_lists_what_will_and_will_not_happen_and_writes_nothing(
    operator_client, failed
):
    before = Event.objects.count()
    html = operator_client.get(
        f"/runs/{failed.id}/retry/preview/?step=doomed_branch", **HTMX
    ).content.decode()
    assert "<code>doomed_branch</code>" in html and "Retry now" in html
    assert Event.objects.count() == before


def test_retry_from_the_page_reopens_the_run(operator_client, failed):
    response = operator_client.post(f"/runs/{failed.id}/retry/", {"step": "doomed_branch"}, **HTMX)
    assert response["HX-Refresh"] == "true"
    failed.refresh_from_db()
    assert failed.status == RunStatus.RUNNING
    assert Step.objects.get(run=failed, key="doomed_branch").status == StepStatus.QUEUED
    assert Event.objects.get(run=failed, type=events.RUN_REOPENED).payload["actor"] == "olivia"
    run_queued(failed)
    failed.refresh_from_db()
    assert failed.status == RunStatus.SUCCEEDED
