"""A step that names a compensation and turns out to have succeeded after its run
stopped (a resolution decides it did) is undone like the others: its run compensates
again, and ends as it was ending."""

from __future__ import annotations

from unittest import mock

import pytest

from reconciliation.services import resolve_claim
from reconciliation.wording import preview_summary
from runs import engine
from runs.engine import preview_resolution
from runs.engine.tools import finish_with_result, start_attempt
from runs.models import Claim, Event, Run, Step
from runs.record import events
from runs.resolutions import COMPENSATES
from runs.states import ClaimStatus, RunStatus, StepStatus
from runs.testing import on_commit_callbacks_run, run_inline
from runs.workflows import Retry
from tests.support import workflows as test_workflows

pytestmark = pytest.mark.django_db


def _compensations(run: Run) -> dict[str, str]:
    return dict(Step.objects.filter(run=run).exclude(compensates="").values_list("name", "status"))


def _drive(run: Run) -> Run:
    while step := Step.objects.filter(run=run, status=StepStatus.QUEUED).first():
        with on_commit_callbacks_run():
            engine.execute_step(step_id=step.id, worker="t")
    run.refresh_from_db()
    return run


def test_a_guarded_step_resolved_succeeded_after_its_run_was_cancelled_is_compensated():
    run = run_inline("compensated-deploy")
    assert run.status == RunStatus.NEEDS_RECONCILIATION
    claim = Claim.objects.get(run=run)
    with on_commit_callbacks_run():
        assert engine.cancel_run(run_id=run.id, actor="ann").status == RunStatus.CANCELLED

    with on_commit_callbacks_run():
        resolve_claim(claim.id, ClaimStatus.SUCCEEDED, actor="ann", note="it deployed")

    run.refresh_from_db()
    assert (run.status, run.ends_as) == (RunStatus.COMPENSATING, RunStatus.CANCELLED)
    assert _compensations(run) == {"roll_back": StepStatus.QUEUED}
    began = Event.objects.filter(run=run, type=events.RUN_COMPENSATING).last()
    assert began.payload["compensations"] == ["roll_back"]
    run = _drive(run)
    assert run.status == RunStatus.CANCELLED
    assert run.error.startswith("cancelled by ann")
    assert _compensations(run) == {"roll_back": StepStatus.SUCCEEDED}
    assert Step.objects.get(run=run, name="announce_release").status == StepStatus.PENDING


def test_a_guarded_step_resolved_failed_after_its_run_was_cancelled_needs_no_undo():
    run = run_inline("compensated-deploy")
    claim = Claim.objects.get(run=run)
    with on_commit_callbacks_run():
        engine.cancel_run(run_id=run.id, actor="ann")
        resolve_claim(claim.id, ClaimStatus.FAILED, actor="ann", note="it never deployed")
    run.refresh_from_db()
    assert run.status == RunStatus.CANCELLED
    assert _compensations(run) == {}


def test_a_step_finishing_after_a_compensation_failed_is_planned_failed_and_retried_with_it(
    operator_client,
):
    """`charge` was running when the run was cancelled; `release` (the undo of
    `reserve`) then failed for good and ended the run failed. When `charge` succeeds, its
    undo `refund` must not run out of order in a finished run, nor be left queued where
    nothing starts it: it is planned failed, saying why, beside `release`; retrying the
    failed compensations runs both, and the run ends as it was ending (cancelled)."""
    run = engine.submit_run(workflow="compensated-order", input={"outcome": "ok"})
    with on_commit_callbacks_run():
        engine.execute_step(step_id=Step.objects.get(run=run, key="reserve").id, worker="t")
    charging = start_attempt(step_id=Step.objects.get(run=run, key="charge").id, worker="t")
    assert charging is not None
    release = test_workflows.compensated.compensations["release"]

    def release_refused(ctx):
        raise test_workflows.NotApplied("the seat service refused the release")

    with (
        mock.patch.object(release, "fn", release_refused),
        mock.patch.object(release, "retry", Retry(max_attempts=1)),  # planned with one
    ):
        with on_commit_callbacks_run():
            assert engine.cancel_run(run_id=run.id, actor="ann").status == RunStatus.COMPENSATING
        run = _drive(run)
    assert (run.status, run.ends_as) == (RunStatus.FAILED, RunStatus.CANCELLED)
    assert run.error.startswith("step release failed")

    with on_commit_callbacks_run():
        finish_with_result(charging, 100)

    run.refresh_from_db()
    assert run.status == RunStatus.FAILED
    assert _compensations(run) == {"release": StepStatus.FAILED, "refund": StepStatus.FAILED}
    refund = Step.objects.get(run=run, key="refund")
    said = (
        "not run: charge succeeded after the run's compensation had failed; retry the "
        "failed compensations to run it too"
    )
    assert refund.error == said
    assert not Step.objects.filter(run=run, status=StepStatus.QUEUED).exists()
    planned = Event.objects.filter(run=run, type=events.COMPENSATION_PLANNED, step_id=refund.id)
    assert [e.payload["status"] for e in planned] == [StepStatus.FAILED]
    page = operator_client.get(f"/runs/{run.id}/").content.decode()
    assert said.replace("'", "&#x27;") in page

    with on_commit_callbacks_run():
        reopened = engine.retry_steps(run_id=run.id, step_keys=["release", "refund"], actor="ann")
    assert reopened.status == RunStatus.COMPENSATING
    for _ in range(4):  # two compensations; a step nothing can start stays queued
        if step := Step.objects.filter(run=run, status=StepStatus.QUEUED).first():
            with on_commit_callbacks_run():
                engine.execute_step(step_id=step.id, worker="t")
    run.refresh_from_db()

    assert (run.status, run.steps_remaining) == (RunStatus.CANCELLED, 0)
    assert _compensations(run) == {"release": StepStatus.SUCCEEDED, "refund": StepStatus.SUCCEEDED}
    assert not Step.objects.filter(run=run, status=StepStatus.QUEUED).exists()


def test_resolving_a_cancelled_runs_compensable_step_previews_and_shows_its_compensation(
    operator_client,
):
    """The claim page says, before the decision, that resolving `deploy_release` as
    succeeded plans its compensation; after the decision the run page lists the planned
    `roll_back` step, queued, with the run compensating."""
    run = run_inline("compensated-deploy")
    claim = Claim.objects.get(run=run)
    with on_commit_callbacks_run():
        assert engine.cancel_run(run_id=run.id, actor="ann").status == RunStatus.CANCELLED
    said = (
        "the run already cancelled: step deploy_release succeeds and its compensation "
        "roll_back runs (the run compensates, then ends cancelled again)"
    )
    preview = preview_resolution(claim_id=claim.id, outcome=ClaimStatus.SUCCEEDED)
    assert (preview.action, preview_summary(preview)) == (COMPENSATES, said)
    assert (preview.step_status, preview.run_status) == ("succeeded", RunStatus.COMPENSATING)

    page = operator_client.get(f"/reconciliation/claims/{claim.pk}/").content.decode()
    assert f"Then: {said}" in page
    response = operator_client.post(
        f"/reconciliation/claims/{claim.pk}/resolve/",
        {"outcome": "succeeded", "note": "it deployed"},
        HTTP_HX_REQUEST="true",
    )
    assert response.status_code == 200

    run.refresh_from_db()
    assert (run.status, run.ends_as) == (RunStatus.COMPENSATING, RunStatus.CANCELLED)
    page = operator_client.get(f"/runs/{run.id}/").content.decode()
    row = page[page.index('<tr id="step-roll_back">') :]
    row = row[: row.index("</tr>")]
    assert "<code>roll_back</code>" in row and "status-queued" in row
    deploy = page[page.index('<tr id="step-deploy_release">') :]
    assert "status-succeeded" in deploy[: deploy.index("</tr>")]
