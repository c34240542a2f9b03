"""preview_resolution(): what a decision would do, computed without writing, and then
done by resolve_claim exactly as previewed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from examples.models import TargetRecord
from reconciliation.wording import preview_summary
from runs import engine
from runs.engine import preview_resolution, preview_resolutions, resolve_claim
from runs.engine.tools import start_attempt
from runs.errors import ClaimNotFound, InvalidResolution
from runs.models import Attempt, Claim, Event, Run, Step
from runs.resolutions import Preview
from runs.states import ClaimStatus, RunStatus, StepStatus
from runs.workflows import GUARDED, PURE, TRANSACTIONAL, Context, Retry, Workflow
from tests.support.declared import declared
from tests.support.factories import crashed_merge, enter_effect, expire_leases, raised

# A guarded step whose result a map step maps over.
list_then_map = Workflow("list-then-map", version=1, input={})


@list_then_map.step(kind=GUARDED)
def fetch_changes(ctx: Context) -> list[int]:
    raise TimeoutError("change list API timed out")


@list_then_map.map_step(over="fetch_changes", batch_size=2, kind=TRANSACTIONAL)
def record_change(ctx: Context, item: Any) -> None:
    TargetRecord.objects.create(record_id=0, run_id=ctx.run_id, payload=json.dumps(item)[:100])


# Two guarded steps one step waits for.
twin_deploys = Workflow("twin-deploys", version=1, input={})


@twin_deploys.step(kind=GUARDED, after=[], retry=Retry(max_attempts=2))
def deploy_east(ctx: Context) -> str:
    raise TimeoutError("east deploy API timed out")


@twin_deploys.step(kind=GUARDED, after=[], retry=Retry(max_attempts=2))
def deploy_west(ctx: Context) -> str:
    raise TimeoutError("west deploy API timed out")


@twin_deploys.step(kind=PURE, after=["deploy_east", "deploy_west"])
def report(ctx: Context) -> str:
    return "both deployed"


_workflows = declared(list_then_map, twin_deploys)


def all_rows() -> tuple:
    """Every row a resolution could touch, and how many events there are."""
    return (
        list(Run.objects.order_by("id").values()),
        list(Step.objects.order_by("id").values()),
        list(Claim.objects.order_by("id").values()),
        list(Attempt.objects.order_by("id").values()),
        Event.objects.count(),
    )


def previewed_then_resolved(claim: Claim, outcome: str, **kwargs):
    """The preview, checked to write nothing, then the resolution it describes."""
    before = all_rows()
    preview = preview_resolution(claim_id=claim.id, outcome=outcome)
    assert all_rows() == before
    resolution = resolve_claim(claim.id, outcome, actor="ann", note="checked", **kwargs)
    assert (resolution.step_status, resolution.run_status) == (
        preview.step_status,
        preview.run_status,
    )
    return preview


def test_preview_succeeded_resumes_and_names_the_steps_that_become_ready(db):
    run = raised("fan-out")  # deploy unresolved, notify succeeded, announce waits on deploy
    claim = Claim.objects.get(run=run)

    preview = previewed_then_resolved(claim, "succeeded", result="v1")

    assert (preview.action, preview.ready, preview.expands) == ("resumes", ("announce",), ())
    said = preview_summary(preview)
    assert said == "step deploy succeeds; announce becomes ready; the run resumes"
    assert (preview.step, preview.workflow, preview.run_id) == ("deploy", "fan-out", run.id)
    assert Step.objects.get(run=run, key="announce").status == StepStatus.QUEUED


def test_preview_succeeded_says_a_map_dependent_would_expand(db):
    run = raised(list_then_map.name)
    claim = Claim.objects.get(run=run)

    preview = previewed_then_resolved(claim, "succeeded", result=[1, 2, 3])

    assert (preview.action, preview.ready, preview.expands) == ("resumes", (), ("record_change",))
    assert preview_summary(preview) == (
        "step fetch_changes succeeds; record_change would expand into batches; the run resumes"
    )
    assert sorted(
        Step.objects.filter(run=run, parent__isnull=False).values_list("key", "status")
    ) == [("record_change[0]", StepStatus.QUEUED), ("record_change[1]", StepStatus.QUEUED)]


def test_preview_succeeded_of_the_last_step_finishes_the_run(db):
    claim = crashed_merge()

    preview = previewed_then_resolved(claim, "succeeded", result={"merge_id": 7})

    assert (preview.action, preview.step_status, preview.run_status) == (
        "finishes_run",
        StepStatus.SUCCEEDED,
        RunStatus.SUCCEEDED,
    )
    said = preview_summary(preview)
    assert said == "step merge succeeds, and so does the run: it was its last step"


def test_preview_failed_retries_with_the_attempt_numbers_and_the_new_claim(db):
    claim = crashed_merge()

    preview = previewed_then_resolved(claim, "failed")

    assert (preview.action, preview.attempt, preview.max_attempts) == ("retries", 2, 3)
    assert preview.next_claim_key == f"{claim.key}/retry-2"
    assert preview_summary(preview) == (
        f"step merge retried: attempt 2 of 3, new claim {claim.key}/retry-2; the run resumes"
    )
    retry = start_attempt(step_id=claim.step_id, worker="w")
    assert (retry.attempt.number, retry.claim.key) == (2, preview.next_claim_key)

    # The retry's claim becomes unresolved in turn: its next key counts on from it.
    enter_effect(retry)
    expire_leases()
    engine.sweep()
    second = Claim.objects.get(key=f"{claim.key}/retry-2")
    preview = preview_resolution(claim_id=second.id, outcome="failed")
    assert (preview.attempt, preview.next_claim_key) == (3, f"{claim.key}/retry-3")


def test_preview_failed_without_attempts_left_fails_the_run(db):
    claim = crashed_merge()
    for _ in range(2):  # attempts 2 and 3 die too
        resolve_claim(claim.id, "failed", actor="ann", note="not merged")
        enter_effect(start_attempt(step_id=claim.step_id, worker="w"))
        expire_leases()
        engine.sweep()
        claim = Claim.objects.get(step_id=claim.step_id, status=ClaimStatus.UNRESOLVED)

    preview = previewed_then_resolved(claim, "failed")

    assert (preview.action, preview.step_status, preview.run_status) == (
        "fails_run",
        StepStatus.FAILED,
        RunStatus.FAILED,
    )
    assert preview_summary(preview) == (
        "step merge fails and the run fails: no attempts remain (3 of 3 used)"
    )


@pytest.mark.parametrize("outcome", ["succeeded", "failed"])
def test_preview_of_a_finished_run_is_recorded_only(db, outcome):
    run = raised("doomed-beside-guarded")
    assert run.status == RunStatus.FAILED
    claim = Claim.objects.get(run=run, step__name="deploy_now")

    preview = previewed_then_resolved(claim, outcome)

    assert (preview.action, preview_summary(preview)) == (
        "recorded_only",
        "recorded only: the run already failed; nothing is scheduled",
    )
    assert (preview.step_status, preview.run_status) == (outcome, RunStatus.FAILED)


def test_preview_of_a_claim_no_longer_unresolved(db):
    claim = crashed_merge()
    resolve_claim(claim.id, "failed", actor="ann", note="not merged")
    claim.refresh_from_db()

    preview = preview_resolution(claim_id=claim.id, outcome="succeeded")

    when = claim.resolved_at.isoformat(timespec="seconds")
    assert (preview.action, preview_summary(preview)) == (
        "not_unresolved",
        f"already resolved as failed by ann at {when}",
    )
    run = engine.submit_run(workflow="charge-payment", input={"amount": 1})
    started = start_attempt(step_id=Step.objects.get(run=run).id, worker="w")
    preview = preview_resolution(claim_id=started.claim.id, outcome="failed")
    assert (preview.action, preview_summary(preview)) == (
        "not_unresolved",
        "the claim is in_flight, not unresolved",
    )


def test_preview_refuses_unknown_claims_and_outcomes(db):
    with pytest.raises(ClaimNotFound):
        preview_resolution(claim_id=999999, outcome="failed")
    assert preview_resolutions(claim_ids=[999999], outcome="failed")[0].action == "refused"
    claim = crashed_merge()
    with pytest.raises(InvalidResolution) as refused:
        preview_resolution(claim_id=claim.id, outcome="maybe")
    assert refused.value.field == "outcome"


def test_previews_of_one_run_see_the_decisions_before_them(db):
    run = raised(twin_deploys.name)  # both deploys unresolved; report waits for both
    east = Claim.objects.get(run=run, step__name="deploy_east")
    west = Claim.objects.get(run=run, step__name="deploy_west")
    before = all_rows()

    first, second = preview_resolutions(claim_ids=[east.id, west.id], outcome="succeeded")

    assert all_rows() == before
    assert (first.action, first.ready, first.run_status) == (
        "resumes",
        (),
        RunStatus.NEEDS_RECONCILIATION,
    )
    assert preview_summary(first) == (
        "step deploy_east succeeds; report still waits on other steps; "
        "the run still waits on 1 other unresolved claim(s)"
    )
    assert (second.action, second.ready, second.run_status) == (
        "resumes",
        ("report",),
        RunStatus.RUNNING,
    )
    # Listed twice: the second entry would find it decided.
    again = preview_resolutions(claim_ids=[east.id, east.id], outcome="failed")
    assert [p.action for p in again] == ["retries", "not_unresolved"]


@pytest.mark.parametrize(
    ("facts", "said"),
    [
        (
            dict(action="refused", because=Preview.Because.NO_CLAIM),
            "no claim with id 7",
        ),
        (
            dict(action="not_unresolved", because=Preview.Because.DECIDED_EARLIER),
            "already decided by an earlier entry of this list",
        ),
        (
            dict(
                action="recorded_only",
                because=Preview.Because.STEP_GOES_ON,
                step="merge",
                step_status="queued",
            ),
            "recorded only: step merge is queued and goes on by itself",
        ),
        (
            dict(action="resumes", step="merge", other_unresolved=0),
            "step merge succeeds; no step waits on it",
        ),
        (
            dict(action="resumes", step="a", ready=("b", "c"), waiting=("d", "e"), resumes=True),
            "step a succeeds; b, c become ready; d, e still wait on other steps; the run resumes",
        ),
    ],
)
def test_each_fact_the_other_tests_do_not_reach_is_worded_as_before(facts, said):
    """The branches no database scenario above reaches, worded from the facts alone."""
    assert preview_summary(Preview(claim_id=7, outcome="succeeded", **facts)) == said
