"""The pauses page, the overview's Paused panel, and the paused marks on the run page,
the runs list and the reconciliation queue (docs/operating.md#pause-and-resume).
Operators pause and resume; viewers read, and are refused (403) if they post."""

from __future__ import annotations

import re

import pytest

from runs import engine
from runs.models import Pause, PauseChange, Run
from tests.support import factories
from tests.support.markup import folded


@pytest.fixture
def paused_run(db) -> tuple[Pause, Run]:
    pause = engine.pause(workflow="merge-change", step="merge", actor="ann", reason="host down")
    return pause, engine.submit_run(workflow="merge-change", input={"change_id": 5})


def test_operator_pauses_from_the_page_and_sees_it_in_the_audit(operator_client, db):
    page = operator_client.get("/pauses/?workflow=merge-change").content.decode()
    assert 'option value="merge"' in page and "Nothing is paused." in page

    response = operator_client.post(
        "/pauses/pause/", {"workflow": "merge-change", "step": "merge", "reason": "host down"}
    )

    assert response.status_code == 302 and response["Location"] == "/pauses/"
    pause = Pause.objects.get()
    assert (pause.workflow, pause.step, pause.actor, pause.reason) == (
        "merge-change",
        "merge",
        "olivia",
        "host down",
    )
    page = operator_client.get("/pauses/").content.decode()
    assert "Paused step merge of merge-change: no new attempt of it starts" in page
    assert "host down" in page and "Resume" in page
    assert page.count("<tr>") - 1 == 1  # one audit row


@pytest.mark.parametrize(
    ("form", "field", "says"),
    [
        ({"workflow": "merge-change", "reason": ""}, "pause-reason-error", "needs a reason"),
        ({"workflow": "nope", "reason": "r"}, "pause-workflow-error", "unknown workflow"),
        ({"workflow": "", "reason": "r"}, "pause-workflow-error", "Choose the workflow to pause."),
        (
            {"workflow": "merge-change", "step": "mreg", "reason": "r"},
            "pause-step-error",
            "no step",
        ),
    ],
)
def test_a_bad_pause_form_says_why_beside_its_field_and_writes_nothing(
    operator_client, db, form, field, says
):
    response = operator_client.post("/pauses/pause/", form)

    assert response.status_code == 422
    page = response.content.decode()
    assert f'id="{field}" role="alert">' in page and says in page
    assert (Pause.objects.count(), PauseChange.objects.count()) == (0, 0)


def test_pausing_twice_from_the_page_is_refused(operator_client, paused_run):
    response = operator_client.post(
        "/pauses/pause/", {"workflow": "merge-change", "step": "merge", "reason": "again"}
    )
    assert response.status_code == 422
    page = response.content.decode()
    assert re.search(
        r"is already paused: by ann \d+ s ago \(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC\): host down",
        page,
    ), page
    (refusal,) = re.findall(r'<p class="error" role="alert">(.*?)</p>', page, re.DOTALL)
    assert not re.search(r":\d\d\.\d{6}", refusal)  # no raw microseconds
    assert Pause.objects.count() == 1


def test_operator_resumes_from_the_overview_and_goes_back_there(operator_client, paused_run):
    pause, _ = paused_run
    page = operator_client.get("/").content.decode()
    assert 'aria-labelledby="paused-title"' in page and "host down" in page
    assert f'action="/pauses/{pause.id}/resume/"' in page

    response = operator_client.post(
        f"/pauses/{pause.id}/resume/", {"reason": "host is back", "back": "overview"}
    )

    assert response.status_code == 302 and response["Location"] == "/"
    assert Pause.objects.count() == 0
    assert list(PauseChange.objects.order_by("id").values_list("action", "actor", "reason")) == [
        ("pause", "ann", "host down"),
        ("resume", "olivia", "host is back"),
    ]
    assert "Nothing is paused." in operator_client.get("/").content.decode()


def test_a_resume_without_a_reason_says_so_beside_the_field(operator_client, paused_run):
    pause, _ = paused_run
    response = operator_client.post(f"/pauses/{pause.id}/resume/", {"reason": " "})
    assert response.status_code == 422
    assert f'id="resume-error-{pause.id}" role="alert">a resume needs a reason' in (
        response.content.decode()
    )
    assert Pause.objects.count() == 1


def test_viewer_sees_pauses_without_controls_and_is_refused_when_posting(viewer_client, paused_run):
    pause, _ = paused_run
    for path in ("/", "/pauses/"):
        page = viewer_client.get(path).content.decode()
        assert "host down" in page
        assert "/resume/" not in page and "/pauses/pause/" not in page
    refused = (
        viewer_client.post("/pauses/pause/", {"workflow": "pure-chain", "reason": "r"}),
        viewer_client.post(f"/pauses/{pause.id}/resume/", {"reason": "r"}),
    )
    assert [r.status_code for r in refused] == [403, 403]
    assert list(Pause.objects.values_list("id", flat=True)) == [pause.id]
    assert PauseChange.objects.count() == 1


def test_the_run_page_and_the_runs_list_mark_the_paused_step(viewer_client, paused_run):
    _, run = paused_run
    page = folded(viewer_client.get(f"/runs/{run.id}/").content)
    assert '<span class="status status-paused">paused</span>' in page
    assert "step merge paused by <strong>ann</strong>" in page and "host down" in page

    listed = viewer_client.get("/runs/").content.decode()
    assert listed.count('class="status status-paused"') == 1


def test_the_reconciliation_queue_says_its_workflow_is_paused(viewer_client, db):
    factories.crashed_merge(change_id=8)
    assert "paused workflows" not in viewer_client.get("/reconciliation/").content.decode()
    engine.pause(workflow="merge-change", actor="ann", reason="host down")
    page = viewer_client.get("/reconciliation/").content.decode()
    assert 'aria-label="paused workflows"' in page and "host down" in page


def test_the_pause_form_chooses_a_workflow_only_when_opened_for_one(operator_client):
    plain = folded(operator_client.get("/pauses/").content)
    assert '<option value="" selected>Choose a workflow…</option>' in plain
    assert '<option value="merge-change" selected>' not in plain
    opened = folded(operator_client.get("/pauses/?workflow=merge-change").content)
    assert '<option value="merge-change" selected>merge-change</option>' in opened
    assert '<option value="">Choose a workflow…</option>' in opened
