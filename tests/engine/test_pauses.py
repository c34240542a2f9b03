"""Pausing a workflow, or one step of it (runs/engine/policies/pauses.py): the start
statement refuses its steps, every way in (a message, a successor started in its
predecessor's finish, a batch, the sweeper) meets the one check, nothing is lost, and
a resume starts what waited exactly once. In-process against real PostgreSQL; the same
through a real worker is tests/integration/test_pauses_live.py."""

from __future__ import annotations

import pytest

from examples.models import Merge, TargetRecord
from runs import engine
from runs.engine.tools import run_attempt, start_attempt
from runs.errors import AlreadyPaused, NotPaused, PauseReasonRequired, UnknownStep, UnknownWorkflow
from runs.models import Attempt, Pause, PauseChange, Run, Step
from runs.ops import metrics
from runs.states import AttemptStatus, RunStatus, StepStatus
from tests.support.factories import earlier

pytestmark = pytest.mark.django_db(transaction=True)


def step_of(run: Run, key: str) -> Step:
    return Step.objects.get(run=run, key=key)


def paused_count(workflow: str) -> float:
    return metrics.PAUSED_STARTS.labels(workflow)._value.get()


def test_a_paused_step_is_not_started_by_1000_deliveries_and_a_sweep_then_resume_starts_it_once(
    settings,
):
    """The acceptance test: `merge` of merge-change paused, 1,000 deliveries of its
    message and a sweep start nothing; the resume starts it once, with one merge."""
    settings.RUNS_REPUBLISH_AFTER_SECONDS = 0  # the sweeper would republish any queued step
    pause = engine.pause(workflow="merge-change", step="merge", actor="ann", reason="host down")
    run = engine.submit_run(workflow="merge-change", input={"change_id": 7})
    merge = step_of(run, "merge")
    before = paused_count("merge-change")

    outcomes = {engine.execute_step(step_id=merge.id, worker=f"w{n % 4}") for n in range(1000)}
    report = engine.sweep()

    assert outcomes == {"skipped"}
    assert merge.id not in report.republished
    merge.refresh_from_db()
    assert (merge.status, merge.attempts, merge.current_attempt_id) == (StepStatus.QUEUED, 0, None)
    assert Attempt.objects.filter(run=run).count() == 0
    assert Merge.objects.filter(run_id=run.id).count() == 0
    assert Run.objects.get(pk=run.id).status == RunStatus.PENDING
    assert paused_count("merge-change") - before == 1000

    resumed = engine.resume(pause_id=pause.id, actor="bob", reason="host is back")

    assert resumed.republished == [merge.id]
    assert engine.execute_step(step_id=merge.id, worker="w") == "succeeded"
    assert engine.execute_step(step_id=merge.id, worker="w") == "skipped"  # a duplicate
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert list(Attempt.objects.filter(run=run).values_list("status", flat=True)) == [
        AttemptStatus.SUCCEEDED
    ]
    assert Merge.objects.filter(run_id=run.id).count() == 1


def test_a_step_pause_holds_that_step_only_even_as_a_direct_successor():
    """pure-chain: first -> second. Pausing `second` lets `first` run; `first`'s finish
    would start `second` in its own transaction (start_successor), and the same start
    statement refuses it there: `second` stays queued, with no attempt."""
    pause = engine.pause(workflow="pure-chain", step="second", actor="ann", reason="r")
    run = engine.submit_run(workflow="pure-chain", input={})

    assert engine.execute_step(step_id=step_of(run, "first").id, worker="t", successors=5) == (
        "succeeded"
    )

    second = step_of(run, "second")
    assert (second.status, second.attempts) == (StepStatus.QUEUED, 0)
    assert step_of(run, "first").status == StepStatus.SUCCEEDED
    assert engine.resume(pause_id=pause.id, actor="ann", reason="r").republished == [second.id]
    assert engine.execute_step(step_id=second.id, worker="t") == "succeeded"
    assert Run.objects.get(pk=run.id).status == RunStatus.SUCCEEDED


def test_a_workflow_pause_holds_all_its_steps_and_no_other_workflow():
    engine.pause(workflow="parallel-pure", actor="ann", reason="all of it")
    held = engine.submit_run(workflow="parallel-pure", input={})
    other = engine.submit_run(workflow="pure-chain", input={})

    for name in ("left", "right"):
        assert engine.execute_step(step_id=step_of(held, name).id, worker="t") == "skipped"
    engine.execute_step(step_id=step_of(other, "first").id, worker="t", successors=5)

    assert set(held.steps.values_list("status", flat=True)) == {StepStatus.QUEUED}
    assert Attempt.objects.filter(run=held).count() == 0
    assert Run.objects.get(pk=other.id).status == RunStatus.SUCCEEDED


def test_one_step_paused_lets_its_siblings_run():
    """parallel-pure: left and right, independent. Pausing `left` holds it alone."""
    pause = engine.pause(workflow="parallel-pure", step="left", actor="ann", reason="r")
    run = engine.submit_run(workflow="parallel-pure", input={})
    for name in ("left", "right"):
        engine.execute_step(step_id=step_of(run, name).id, worker="t")

    assert dict(run.steps.values_list("name", "status")) == {
        "left": StepStatus.QUEUED,
        "right": StepStatus.SUCCEEDED,
    }
    engine.resume(pause_id=pause.id, actor="ann", reason="r")
    engine.execute_step(step_id=step_of(run, "left").id, worker="t")
    assert Run.objects.get(pk=run.id).status == RunStatus.SUCCEEDED


def test_an_attempt_running_when_the_pause_commits_finishes_and_is_recorded():
    run = engine.submit_run(workflow="pure-chain", input={})
    started = start_attempt(step_id=step_of(run, "first").id, worker="t")
    assert started is not None

    engine.pause(workflow="pure-chain", actor="ann", reason="mid-flight")
    assert run_attempt(started)[0] == "succeeded"

    first, second = step_of(run, "first"), step_of(run, "second")
    assert (first.status, first.attempts) == (StepStatus.SUCCEEDED, 1)
    assert list(Attempt.objects.filter(step=first).values_list("status", flat=True)) == [
        AttemptStatus.SUCCEEDED
    ]
    # What the finish made ready waits: queued, and refused when delivered.
    assert engine.execute_step(step_id=second.id, worker="t") == "skipped"
    assert step_of(run, "second").status == StepStatus.QUEUED


def test_a_map_step_pause_holds_every_batch():
    pause = engine.pause(workflow="migrate-records", step="migrate", actor="ann", reason="db")
    run = engine.submit_run(workflow="migrate-records", input={"count": 6, "batch_size": 2})
    engine.execute_step(step_id=step_of(run, "list_records").id, worker="t")
    batches = list(Step.objects.filter(run=run, parent__isnull=False).order_by("batch_index"))
    assert [b.key for b in batches] == ["migrate[0]", "migrate[1]", "migrate[2]"]

    for batch in batches:
        assert engine.execute_step(step_id=batch.id, worker="t") == "skipped"

    assert set(
        Step.objects.filter(run=run, parent__isnull=False).values_list("status", flat=True)
    ) == {StepStatus.QUEUED}
    assert Attempt.objects.filter(step__in=batches).count() == 0
    assert TargetRecord.objects.filter(run_id=run.id).count() == 0

    resumed = engine.resume(pause_id=pause.id, actor="ann", reason="db is back")
    assert sorted(resumed.republished) == sorted(b.id for b in batches)
    for batch in batches:
        assert engine.execute_step(step_id=batch.id, worker="t") == "succeeded"
    assert Run.objects.get(pk=run.id).status == RunStatus.SUCCEEDED
    assert TargetRecord.objects.filter(run_id=run.id).count() == 6


def test_the_sweeper_republishes_a_queued_step_but_not_a_paused_one(settings):
    settings.RUNS_REPUBLISH_AFTER_SECONDS = 0
    engine.pause(workflow="merge-change", actor="ann", reason="r")
    held = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    free = engine.submit_run(workflow="pure-chain", input={})

    republished = engine.sweep().republished

    assert step_of(free, "first").id in republished
    assert step_of(held, "merge").id not in republished


@pytest.mark.parametrize(
    ("workflow", "step", "data", "held_by"),
    [
        ("wait-continue", "nudge", {}, ""),
        ("wait-continue", "nudge", {}, "nudge"),
        ("sleepy", "nap", {"seconds": 3600}, ""),
    ],
)
def test_a_queued_wait_whose_message_was_lost_during_a_pause_is_sent_again_by_the_sweeper(
    workflow, step, data, held_by
):
    """A wait or sleep step takes no attempt, so a pause (of its workflow, or of its
    name) does not hold it: delivered, it reaches its wait. Its message lost while the
    pause stands, the sweeper sends it again as it does any queued step's, and the
    delivery parks it; it does not wait for the resume."""
    engine.pause(workflow=workflow, step=held_by, actor="ann", reason="r")
    run = engine.submit_run(workflow=workflow, input=data)
    wait = step_of(run, step)
    earlier([wait.id], 61)  # its message never came; the republish bound (60 s) passed

    assert wait.id in engine.sweep().republished

    assert engine.execute_step(step_id=wait.id, worker="t") == "skipped"  # no attempt
    wait.refresh_from_db()
    assert (wait.status, wait.attempts) == (StepStatus.WAITING, 0)
    assert Run.objects.get(pk=run.id).status == RunStatus.WAITING


def test_a_resume_leaves_what_another_pause_still_holds():
    """A workflow's pause and one of its step's: resuming the workflow's leaves the
    step held by its own pause."""
    whole = engine.pause(workflow="parallel-pure", actor="ann", reason="all")
    engine.pause(workflow="parallel-pure", step="left", actor="ann", reason="left only")
    run = engine.submit_run(workflow="parallel-pure", input={})
    for key in ("left", "right"):  # delivered while paused: turned away
        assert engine.execute_step(step_id=step_of(run, key).id, worker="t") == "skipped"

    resumed = engine.resume(pause_id=whole.id, actor="ann", reason="r")

    assert resumed.republished == [step_of(run, "right").id]
    assert engine.execute_step(step_id=step_of(run, "left").id, worker="t") == "skipped"


def test_a_resume_sends_again_only_the_steps_whose_delivery_a_pause_turned_away(published):
    """A step whose message is still queued gets it after the resume; a second message
    for each would double a backlog (bench/backlog.py: 1,345 extra on a queue of about
    2,400 after a 10 s pause). Only a delivery the pause refused took its message off
    the broker, and only that step is sent again."""
    runs = [engine.submit_run(workflow="pure-chain", input={}) for _ in range(3)]
    firsts = [step_of(run, "first").id for run in runs]
    pause = engine.pause(workflow="pure-chain", actor="ann", reason="r")
    assert engine.execute_step(step_id=firsts[0], worker="t") == "skipped"  # turned away
    published.clear()

    resumed = engine.resume(pause_id=pause.id, actor="ann", reason="r")

    assert resumed.republished == [firsts[0]]
    assert [args[0] for _, args, _ in published] == [firsts[0]]
    # The mark is cleared with the message sent: a later pause starts from nothing held.
    assert not Step.objects.filter(pk__in=firsts, held_at__isnull=False).exists()
    # Each step's one message out starts it.
    for step_id in firsts:
        assert engine.execute_step(step_id=step_id, worker="t") == "succeeded"


def test_a_resume_spreads_its_messages_at_the_resume_rate(settings, published):
    settings.RUNS_RESUME_RATE = 2
    pause = engine.pause(workflow="pure-chain", actor="ann", reason="r")
    runs = [engine.submit_run(workflow="pure-chain", input={}) for _ in range(5)]
    for run in runs:  # delivered while paused: turned away
        assert engine.execute_step(step_id=step_of(run, "first").id, worker="t") == "skipped"
    published.clear()

    resumed = engine.resume(pause_id=pause.id, actor="ann", reason="r")

    firsts = [step_of(run, "first").id for run in runs]
    assert resumed.republished == firsts  # oldest first
    sent = [(args[0], eta) for _, args, eta in published]
    assert [step_id for step_id, _ in sent] == firsts
    # Two a second: the first two now, the next two a second later, the last two later.
    assert [eta is None for _, eta in sent] == [True, True, False, False, False]
    third, fifth = sent[2][1], sent[4][1]
    assert third is not None and fifth is not None
    assert 0.5 <= (fifth - third).total_seconds() <= 1.5


def test_a_resume_spread_over_minutes_is_not_sent_again_by_the_sweeper_before_each_message_is_due(
    settings, published
):
    """One message every 100 s: three merges (one of them retrying) go out now, in 100 s
    and in 200 s, far beyond the sweeper's bound of 60 s. A sweep 61 s later sends again
    only the first, whose message was due and has not started it (lost); 100 s later
    only the second; the third's message is still on its way both times. The resume
    leaves queued_at as it was: since when each step waits."""
    settings.RUNS_RESUME_RATE = 0.01
    runs = [
        engine.submit_run(workflow="flaky-merge", input={"change_id": n, "mode": mode})
        for n, mode in enumerate(["", "not_applied_once", ""])
    ]
    merges = [step_of(run, "merge").id for run in runs]
    assert engine.execute_step(step_id=merges[1], worker="t") == "retrying"
    pause = engine.pause(workflow="flaky-merge", actor="ann", reason="host down")
    for merge in merges:  # delivered while paused (the retry's message too): turned away
        assert engine.execute_step(step_id=merge, worker="t") == "skipped"
    earlier(merges, 3600)  # the pause lasted an hour
    queued_at = dict(Step.objects.filter(pk__in=merges).values_list("id", "queued_at"))
    published.clear()

    resumed = engine.resume(pause_id=pause.id, actor="bob", reason="host back")

    assert resumed.republished == merges
    assert [args[0] for _, args, _ in published] == merges
    assert dict(Step.objects.filter(pk__in=merges).values_list("id", "queued_at")) == queued_at

    earlier(merges, 61)
    assert engine.sweep().republished == [merges[0]]
    assert engine.execute_step(step_id=merges[0], worker="t") == "succeeded"

    earlier(merges, 100)
    assert engine.sweep().republished == [merges[1]]
    for merge in merges[1:]:
        assert engine.execute_step(step_id=merge, worker="t") == "succeeded"
    assert {Run.objects.get(pk=run.id).status for run in runs} == {RunStatus.SUCCEEDED}
    assert Merge.objects.filter(run_id__in=[run.id for run in runs]).count() == 3


# --- the record, and what is refused ---------------------------------------------------
def test_pause_and_resume_are_audited_with_actor_and_reason():
    pause = engine.pause(workflow="merge-change", step="merge", actor="ann", reason="host down")
    engine.resume(pause_id=pause.id, actor="bob", reason="host back")

    assert Pause.objects.count() == 0
    assert list(
        PauseChange.objects.order_by("id").values_list(
            "action", "workflow", "step", "actor", "reason", "republished"
        )
    ) == [
        ("pause", "merge-change", "merge", "ann", "host down", 0),
        ("resume", "merge-change", "merge", "bob", "host back", 0),
    ]


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        (
            {"workflow": "merge-change", "reason": "  "},
            PauseReasonRequired,
            "needs a reason",
        ),
        ({"workflow": "nope", "reason": "r"}, UnknownWorkflow, "unknown workflow 'nope'"),
        (
            {"workflow": "merge-change", "step": "mreg", "reason": "r"},
            UnknownStep,
            "has no step 'mreg' in any version; its steps: merge",
        ),
    ],
)
def test_a_bad_pause_is_refused_and_writes_nothing(kwargs, error, says):
    with pytest.raises(error, match=says):
        engine.pause(actor="ann", **kwargs)
    assert (Pause.objects.count(), PauseChange.objects.count()) == (0, 0)


def test_pausing_twice_is_refused_and_the_first_pause_stands():
    first = engine.pause(workflow="merge-change", step="merge", actor="ann", reason="first")
    with pytest.raises(AlreadyPaused, match=r"already paused \(by ann at .*: first\)"):
        engine.pause(workflow="merge-change", step="merge", actor="bob", reason="second")
    assert list(Pause.objects.values_list("id", "actor", "reason")) == [(first.id, "ann", "first")]
    assert PauseChange.objects.count() == 1
    # The whole workflow is another pause, and may stand beside it.
    engine.pause(workflow="merge-change", actor="bob", reason="all")
    assert Pause.objects.count() == 2


def test_a_resume_of_what_is_not_paused_is_refused_and_writes_nothing():
    pause = engine.pause(workflow="merge-change", actor="ann", reason="r")
    with pytest.raises(PauseReasonRequired):
        engine.resume(pause_id=pause.id, actor="ann", reason="")
    assert Pause.objects.count() == 1
    engine.resume(pause_id=pause.id, actor="ann", reason="r")
    with pytest.raises(NotPaused, match=f"pause {pause.id} is not in effect"):
        engine.resume(pause_id=pause.id, actor="ann", reason="again")
    with pytest.raises(NotPaused):
        engine.resume(pause_id=10**9, actor="ann", reason="never")
    assert list(PauseChange.objects.values_list("action", flat=True).order_by("id")) == [
        "pause",
        "resume",
    ]


def test_the_gauges_show_the_paused_work():
    engine.pause(workflow="merge-change", step="merge", actor="ann", reason="r")
    for n in (1, 2):
        engine.submit_run(workflow="merge-change", input={"change_id": n})
    engine.submit_run(workflow="pure-chain", input={})

    text = metrics.exposition(with_database=True).decode()

    assert "durable_runs_pauses 1.0" in text
    assert "durable_runs_paused_steps 2.0" in text  # pure-chain's queued step is not paused


def test_a_step_held_by_a_pause_is_not_the_oldest_wait_for_a_worker():
    """Two merges held by a pause for an hour, a pure-chain step queued a minute ago: the
    oldest wait for a worker is the minute. Before, the gauge and the Workers page said
    an hour, which DurableRunsWorkersNotStarting reads as workers that stopped."""
    from runs.web.workers import workers_page

    engine.pause(workflow="merge-change", step="merge", actor="ann", reason="r")
    held = [engine.submit_run(workflow="merge-change", input={"change_id": n}) for n in (1, 2)]
    free = engine.submit_run(workflow="pure-chain", input={})
    earlier([s.id for r in held for s in Step.objects.filter(run=r, name="merge")], 3600)
    earlier([Step.objects.get(run=free, name="first").id], 60)

    text = metrics.exposition(with_database=True).decode()
    [age] = [
        float(line.split()[-1])
        for line in text.splitlines()
        if line.startswith("durable_runs_oldest_queued_step_age_seconds ")
    ]
    assert 60 <= age < 600
    assert "durable_runs_queued_steps 3.0" in text  # the alert subtracts the paused ones

    page = workers_page()
    assert (page.waiting, page.paused) == (1, 2)
    assert page.oldest_wait is not None and 60 <= page.oldest_wait.total_seconds() < 600


@pytest.fixture
def published():
    """Every execute message this process publishes: (task name, args, eta)."""
    from datetime import datetime

    from celery.signals import before_task_publish

    sent: list[tuple[str, tuple, datetime | None]] = []

    def record(sender=None, headers=None, body=None, **_):
        eta = headers.get("eta")
        sent.append((sender, tuple(body[0]), datetime.fromisoformat(eta) if eta else None))

    before_task_publish.connect(record, weak=False)
    try:
        yield sent
    finally:
        before_task_publish.disconnect(record)
