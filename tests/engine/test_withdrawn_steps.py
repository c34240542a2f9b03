"""A run that stops for good leaves no step queued (docs/reliability.md#a-run-stopped-mid-effect):
the plan's steps still queued for their first attempt go back to pending in the
transaction that stopped it, with one `steps_withdrawn` event naming them, so neither
the rows nor any figure says they wait for a worker. Before, a cancelled migration's
map batches stayed `queued` for ever, and the event log agreed with them."""

from __future__ import annotations

from runs import engine
from runs.engine.tools import run_attempt, start_attempt
from runs.models import Attempt, Event, Run, Step
from runs.ops.metrics import DatabaseCollector
from runs.record import events, history
from runs.states import RunStatus, StepStatus
from runs.web.workers import workers_page
from tests.support.factories import drain


def statuses(run: Run) -> dict[str, str]:
    return dict(Step.objects.filter(run=run).values_list("key", "status"))


def queued_gauge() -> float:
    [family] = [m for m in DatabaseCollector().collect() if m.name == "durable_runs_queued_steps"]
    return family.samples[0].value


def expanded_migration(count: int = 10, batch_size: int = 2) -> tuple[Run, list[Step]]:
    run = engine.submit_run(
        workflow="migrate-records", input={"count": count, "batch_size": batch_size}
    )
    engine.execute_step(step_id=Step.objects.get(run=run, key="list_records").id, worker="t")
    batches = list(Step.objects.filter(run=run, parent__isnull=False).order_by("batch_index"))
    assert {b.status for b in batches} == {StepStatus.QUEUED}
    return run, batches


def test_a_cancelled_maps_queued_batches_go_back_to_pending_and_are_not_counted(db):
    run, batches = expanded_migration()
    assert queued_gauge() == len(batches) == 5
    assert workers_page().waiting == 5

    engine.cancel_run(run_id=run.id, actor="ann", reason="wrong table")

    keys = [b.key for b in batches]
    assert {statuses(run)[k] for k in keys} == {StepStatus.PENDING}
    assert not Step.objects.filter(run=run, status=StepStatus.QUEUED).exists()
    assert Step.objects.filter(pk__in=[b.id for b in batches], queued_at__isnull=False).count() == 0
    [withdrawn] = Event.objects.filter(run=run, type=events.STEPS_WITHDRAWN)
    assert withdrawn.payload == {"steps": sorted(keys), "why": "the run was cancelled by ann"}
    # Their messages, still in the broker, find them pending and start nothing.
    assert [engine.execute_step(step_id=b.id, worker="t") for b in batches] == ["skipped"] * 5
    assert not Attempt.objects.filter(step__in=batches).exists()
    assert queued_gauge() == 0 and workers_page().waiting == 0
    # The event log says what the rows say.
    assert history.verify_run(Run.objects.get(pk=run.id)) == []


def test_a_batch_started_before_the_cancel_runs_to_its_end_the_rest_are_withdrawn(db):
    run, batches = expanded_migration()
    started = start_attempt(step_id=batches[0].id, worker="w")
    assert started is not None

    engine.cancel_run(run_id=run.id, actor="ann")
    assert run_attempt(started)[0] == "succeeded"

    after = statuses(run)
    assert after[batches[0].key] == StepStatus.SUCCEEDED
    assert [after[b.key] for b in batches[1:]] == [StepStatus.PENDING] * 4
    [withdrawn] = Event.objects.filter(run=run, type=events.STEPS_WITHDRAWN)
    assert withdrawn.payload["steps"] == sorted(b.key for b in batches[1:])
    assert Run.objects.get(pk=run.id).status == RunStatus.CANCELLED
    assert history.verify_run(Run.objects.get(pk=run.id)) == []


def test_a_compensating_run_withdraws_its_plan_but_keeps_its_compensations_queued(db):
    """hold_seat succeeded (it names release_seat), charge_card is queued and never
    started: the cancel compensates; the charge is withdrawn, the release runs."""
    run = engine.submit_run(workflow="refundable-charge", input={})
    engine.execute_step(step_id=Step.objects.get(run=run, key="hold_seat").id, worker="t")

    assert engine.cancel_run(run_id=run.id, actor="ann").status == RunStatus.COMPENSATING

    assert statuses(run)["charge_card"] == StepStatus.PENDING
    assert statuses(run)["release_seat"] == StepStatus.QUEUED
    [withdrawn] = Event.objects.filter(run=run, type=events.STEPS_WITHDRAWN)
    assert withdrawn.payload["steps"] == ["charge_card"]
    assert queued_gauge() == 1  # the compensation waits for a worker; the charge does not

    run = drain(run)
    assert run.status == RunStatus.CANCELLED
    assert statuses(run)["release_seat"] == StepStatus.SUCCEEDED
    assert not Attempt.objects.filter(step__run=run, step__name="charge_card").exists()
    assert history.verify_run(run) == []


def test_a_run_that_had_nothing_queued_writes_no_withdrawal(db):
    run, batches = expanded_migration(count=2, batch_size=2)
    started = start_attempt(step_id=batches[0].id, worker="w")
    assert started is not None
    engine.cancel_run(run_id=run.id, actor="ann")
    assert run_attempt(started)[0] == "succeeded"
    assert not Event.objects.filter(run=run, type=events.STEPS_WITHDRAWN).exists()
