"""The bulk operation pages: the runs list's controls (operators only), the preview and
its confirmation form, the batch's page polling while it runs and listing every item
once it is done; refusals beside their field, nothing written."""

from __future__ import annotations

import html

from django.http import QueryDict

from runs.batches import service
from runs.models import Batch, BatchItem
from runs.states import BatchStatus
from tests.support.api import written
from tests.support.batches import active_runs, failed_runs

HTMX = {"HTTP_HX_REQUEST": "true"}


def text(response) -> str:
    return html.unescape(response.content.decode())


def test_operators_see_the_bulk_controls_with_the_lists_filter(operator_client):
    page = text(operator_client.get("/runs/?status=failed&page=2"))
    assert 'href="/runs/bulk/?status=failed&operation=cancel"' in page
    assert 'href="/runs/bulk/?status=failed&operation=retry"' in page
    assert "Cancel matching…" in page and "Retry failed steps of matching…" in page
    # A filter the list refuses offers no bulk operation.
    assert "Cancel matching…" not in text(operator_client.get("/runs/?status=bogus"))


def test_viewers_see_no_control_and_are_refused_the_preview_and_the_post(viewer_client):
    active_runs(1)
    assert "Cancel matching…" not in text(viewer_client.get("/runs/"))
    assert viewer_client.get("/runs/bulk/?operation=cancel").status_code == 403
    before = written()
    response = viewer_client.post("/runs/bulk/?operation=cancel", {"reason": "mine"})
    assert response.status_code == 403
    assert written() == before and not Batch.objects.exists()


def test_viewers_read_a_batchs_page_and_others_are_refused(client, operator, viewer, submitter):
    """Viewers read every page, batch pages included (docs/api.md#roles); they cannot
    act (above). A submitter has no page but the New run form; nobody signed in is
    sent to the login page."""
    active_runs(1)
    batch = service.create_batch(operation="cancel", params=QueryDict(), actor=operator, reason="r")
    path = f"/runs/batches/{batch.id}/"

    client.force_login(viewer)
    page = client.get(path)
    assert page.status_code == 200
    assert f"<h1>Batch {batch.id}: cancel matching active runs</h1>" in text(page)
    client.force_login(submitter)
    assert client.get(path).status_code == 403
    client.logout()
    anonymous = client.get(path)
    assert (anonymous.status_code, anonymous["Location"]) == (302, f"/login/?next={path}")


def test_preview_shows_the_counts_and_each_retrys_key(operator_client, monkeypatch):
    failed_runs(monkeypatch, 2)
    active_runs(1)
    before = written()

    page = text(operator_client.get("/runs/bulk/?operation=retry"))

    assert written() == before and not Batch.objects.exists()
    assert '<dd id="count-matched">3</dd>' in page
    assert '<dd id="count-applies">2</dd>' in page
    assert '<dd id="count-refused">1</dd>' in page
    assert "still pending: only a failed run's steps are retried" in page
    assert "the same key" in page and "(the external system dedupes it)" in page
    assert "Confirm" in page


def test_confirming_without_a_reason_says_so_beside_the_field(operator_client):
    active_runs(1)
    before = written()
    response = operator_client.post("/runs/bulk/?operation=cancel", {"reason": " "})
    assert response.status_code == 422
    page = text(response)
    assert 'id="reason-error"' in page and "a reason is required" in page
    assert written() == before and not Batch.objects.exists()


def test_a_bad_filter_or_operation_is_refused_and_offers_no_confirmation(operator_client):
    active_runs(1)
    response = operator_client.get("/runs/bulk/?operation=cancel&created_after=someday")
    assert response.status_code == 400
    assert "created_after: 'someday' is not a date" in text(response)
    assert "Confirm" not in text(response)
    response = operator_client.post("/runs/bulk/?operation=erase", {"reason": "x"})
    assert response.status_code == 400
    assert "unknown operation 'erase'" in text(response)
    assert not Batch.objects.exists()


def test_confirming_makes_a_batch_whose_page_polls_then_lists_its_items(operator_client):
    runs = active_runs(2)
    response = operator_client.post("/runs/bulk/?operation=cancel", {"reason": "wrong input"})
    batch = Batch.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/runs/batches/{batch.id}/"
    assert (batch.total, batch.reason, batch.created_by) == (2, "wrong input", "olivia")

    page = text(operator_client.get(f"/runs/batches/{batch.id}/"))
    assert 'hx-trigger="every 1s"' in page
    assert '<progress id="batch-progress-bar" max="2" value="0">' in page

    service.process(batch.id)
    live = operator_client.get(f"/runs/batches/{batch.id}/", **HTMX, HTTP_HX_TARGET="batch-live")
    live = text(live)
    assert 'hx-trigger="every 1s"' not in live
    assert '<progress id="batch-progress-bar" max="2" value="2">' in live
    assert "Results" in live and live.count(">cancelled</td>") == 2
    for run in runs:
        assert f"/runs/{run.id}/" in live
    assert Batch.objects.get().status == BatchStatus.SUCCEEDED
    assert BatchItem.objects.filter(batch=batch, status="applied").count() == 2
