"""Concurrency limits and key holds in-process (docs/authoring.md#limits-and-holds): a
step over its limit stays queued, neither failed nor retried, and starts when a slot
frees, oldest first; a crashed attempt's slot frees when the sweeper recovers it; an
unresolved claim holds its key's guarded steps in other runs until it is decided. The
same against real worker processes (50 runs, a SIGKILL): tests/integration/
test_limits_live.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.urls import reverse

from reconciliation import queries as reconciliation_queries
from runs import engine
from runs.engine.tools import publish, run_attempt, start_attempt
from runs.models import Attempt, Claim, Event, LimitSetting, RateSetting, Run, Slot, Step
from runs.states import AttemptStatus, ClaimStatus, RunStatus, StepStatus
from runs.workflows import PURE, Limit, Rate
from runs.workflows.definition import Workflow
from runs.workflows.errors import WorkflowDefinitionError
from tests.support.declared import registered

pytestmark = pytest.mark.django_db(transaction=True)

SCOPE = "step limited-three.work"


@pytest.fixture
def sent(monkeypatch):
    """The steps the engine sends a message for (no worker takes them here)."""
    ids: list[int] = []
    monkeypatch.setattr(publish, "send", lambda task, arg, countdown=None: ids.append(arg))
    return ids


def _work(n: int) -> list[Step]:
    runs = [engine.submit_run(workflow="limited-three", input={"seconds": 0}) for _ in range(n)]
    return [Step.objects.get(run=run) for run in runs]


def _waited(step: Step) -> list[dict]:
    return list(
        Event.objects.filter(step=step, type="step_waiting_for_slot").values_list(
            "payload", flat=True
        )
    )


def test_a_step_over_its_limit_stays_queued_and_the_oldest_waiter_gets_the_freed_slot(sent):
    a, b, c, d, e = _work(5)
    sent.clear()  # the submissions' own messages
    started = [start_attempt(step_id=s.id, worker="w") for s in (a, b, c)]
    assert all(started)

    assert engine.execute_step(step_id=d.id, worker="w") == "skipped"

    d.refresh_from_db()
    assert (d.status, d.attempts, d.current_attempt_id) == (StepStatus.QUEUED, 0, None)
    assert d.waiting_for == SCOPE
    assert Attempt.objects.filter(step=d).count() == 0
    assert _waited(d) == [{"step": "work", "scope": SCOPE, "in_use": 3, "of": 3}]
    assert Slot.objects.filter(scope=SCOPE).count() == 3
    assert sent == []  # full: nobody to hand a slot to

    assert run_attempt(started[0])[0] == "succeeded"  # a slot frees
    # A newer step finds the free slot but an older one waiting: it waits too, and its
    # second look hands the slot to the oldest.
    assert engine.execute_step(step_id=e.id, worker="w") == "skipped"
    e.refresh_from_db()
    assert e.waiting_for == SCOPE and e.status == StepStatus.QUEUED
    assert sent == [d.id]

    sent.clear()
    assert engine.execute_step(step_id=d.id, worker="w") == "succeeded"
    d.refresh_from_db()
    assert (d.status, d.waiting_for) == (StepStatus.SUCCEEDED, "")
    assert sent == [e.id]  # d's finish freed its slot: the next waiter's turn
    assert engine.execute_step(step_id=e.id, worker="w") == "succeeded"
    # Waiting is not failing: one attempt each, no retry.
    assert [Attempt.objects.filter(step=s).count() for s in (d, e)] == [1, 1]
    running = Attempt.objects.filter(step__in=[a, b, c, d, e], status=AttemptStatus.RUNNING)
    assert running.count() == 2  # b and c, still holding their slots


def test_a_limit_per_key_serialises_one_change_and_lets_another_pass(sent):
    first, second, other = (
        Step.objects.get(
            run=engine.submit_run(workflow="one-per-change", input={"change_id": c, "seconds": 0})
        )
        for c in (301, 301, 302)
    )
    sent.clear()
    assert start_attempt(step_id=first.id, worker="w") is not None

    assert engine.execute_step(step_id=second.id, worker="w") == "skipped"
    assert engine.execute_step(step_id=other.id, worker="w") == "succeeded"

    second.refresh_from_db()
    assert second.waiting_for == "step one-per-change.apply change_id=301"
    assert _waited(second) == [
        {"step": "apply", "scope": "step one-per-change.apply change_id=301", "in_use": 1, "of": 1}
    ]


def test_a_crashed_attempts_slot_frees_when_the_sweeper_recovers_it(sent):
    a, b, c, d = _work(4)
    first = start_attempt(step_id=a.id, worker="w")
    assert first is not None and start_attempt(step_id=b.id, worker="w")
    assert start_attempt(step_id=c.id, worker="w")
    assert engine.execute_step(step_id=d.id, worker="w") == "skipped"
    assert engine.sweep().handed_over == []  # three attempts run: no slot is free
    # Its worker died: the lease runs out.
    Attempt.objects.filter(pk=first.attempt.id).update(
        lease_expires_at=Now() - timedelta(seconds=1)
    )

    report = engine.sweep()

    assert report.crashed == [first.attempt.id]
    assert report.handed_over == [d.id]
    assert engine.execute_step(step_id=d.id, worker="w") == "succeeded"
    assert Slot.objects.filter(scope=SCOPE, attempt__status=AttemptStatus.RUNNING).count() == 2


def test_an_unresolved_claim_holds_its_key_in_other_runs_until_a_person_decides(
    sent, operator_client
):
    unknown = engine.submit_run(workflow="held-merge", input={"change_id": 301, "answers": False})
    assert engine.execute_step(step_id=Step.objects.get(run=unknown).id, worker="w") == "unresolved"
    claim = Claim.objects.get(run=unknown)
    assert (claim.status, claim.hold_key) == (ClaimStatus.UNRESOLVED, "change_id=301")
    second = engine.submit_run(workflow="held-merge", input={"change_id": 301, "answers": True})
    other = engine.submit_run(workflow="held-merge", input={"change_id": 302, "answers": True})
    merge = Step.objects.get(run=second)
    sent.clear()

    assert engine.execute_step(step_id=merge.id, worker="w") == "skipped"
    assert engine.execute_step(step_id=Step.objects.get(run=other).id, worker="w") == "succeeded"

    merge.refresh_from_db()
    assert (merge.status, merge.waiting_for) == (StepStatus.QUEUED, "hold change_id=301")
    assert _waited(merge) == [
        {"step": "merge", "scope": "hold change_id=301", "in_use": 1, "of": None}
    ]
    assert reconciliation_queries.claim_detail(claim.id).holding == 1
    page = operator_client.get(reverse("reconciliation:claim", args=[claim.id]))
    assert "Holding 1 run:" in " ".join(page.content.decode().split())
    run_page = operator_client.get(reverse("runs:detail", args=[second.id]))
    assert "held: 1 unresolved claim(s) on change_id=301" in run_page.content.decode()
    assert sent == []

    engine.resolve_claim(claim, "failed", actor="ann", note="the host shows no merge")

    assert sent == [merge.id]
    assert engine.execute_step(step_id=merge.id, worker="w") == "succeeded"
    assert Run.objects.get(pk=second.id).status == RunStatus.SUCCEEDED


def test_the_run_page_and_the_workers_page_say_why_a_step_waits(sent, operator_client):
    a, b, c, d = _work(4)
    for step in (a, b, c):
        assert start_attempt(step_id=step.id, worker="w") is not None
    assert engine.execute_step(step_id=d.id, worker="w") == "skipped"

    run_page = operator_client.get(reverse("runs:detail", args=[d.run_id])).content.decode()
    workers = operator_client.get(reverse("runs:workers")).content.decode()

    assert "waiting for a slot (3 of 3 in use)" in run_page
    assert f'data-limit="{SCOPE}"' in workers
    row = " ".join(workers.split(f'data-limit="{SCOPE}"')[1].split("</tr>")[0].split())
    assert "3 of 3" in row and '<td class="num">1</td>' in row
    assert "1 more queued step waiting for a slot" in " ".join(workers.split())


def _one_step(**limits) -> Workflow:
    wf = Workflow("limits-declared", 1, input={"change_id": int})  # declared, never run
    wf.step(kind=PURE, **limits)(lambda ctx: None)
    return wf


@pytest.mark.parametrize(
    ("declared", "message"),
    [
        ({"limit": Limit(max=1, per="account")}, "'account' is not a declared input field"),
        ({"limit": [Limit(max=1), Limit(max=2)]}, "two limits with the same per="),
        ({"limit": 3}, "limit= takes Limit"),
        ({"hold": "change_id"}, "hold= is for guarded steps"),
    ],
)
def test_a_wrong_limit_or_hold_is_refused_where_it_is_declared(declared, message):
    with pytest.raises(WorkflowDefinitionError, match=message):
        _one_step(**declared)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5])
def test_a_limit_of_no_slots_is_refused(bad):
    with pytest.raises(WorkflowDefinitionError, match="must be a positive int"):
        Limit(max=bad)


def test_a_workflow_limit_counts_every_step_of_the_workflow(sent):
    wf = Workflow("two-steps-limited", 1, limit=Limit(max=1))
    wf.step(kind=PURE, name="one", after=[])(lambda ctx: 1)
    wf.step(kind=PURE, name="two", after=[])(lambda ctx: 2)
    with registered(wf):
        run = engine.submit_run(workflow="two-steps-limited", input={})
        one, two = Step.objects.filter(run=run).order_by("key")
        assert start_attempt(step_id=one.id, worker="w") is not None

        assert engine.execute_step(step_id=two.id, worker="w") == "skipped"

        two.refresh_from_db()
        assert two.waiting_for == "workflow two-steps-limited"
        assert _waited(two) == [
            {"step": "two", "scope": "workflow two-steps-limited", "in_use": 1, "of": 1}
        ]


def test_a_step_without_a_limit_takes_no_slot():
    run = engine.submit_run(workflow="quick-one", input={})
    assert engine.execute_step(step_id=Step.objects.get(run=run).id, worker="w") == "succeeded"
    assert Slot.objects.count() == 0


def test_a_start_over_its_rate_is_put_off_to_a_turn_of_its_own(monkeypatch):
    """5 a second: one start every 200 ms. Three steps at once: the first starts, the
    second and third are put off to the next two turns, each with its message due then;
    a message that comes early is sent again for what remains, taking no second turn."""
    countdowns: dict[int, float | None] = {}
    monkeypatch.setattr(
        publish, "send", lambda task, arg, countdown=None: countdowns.__setitem__(arg, countdown)
    )
    steps = [Step.objects.get(run=engine.submit_run(workflow="paced", input={})) for _ in range(3)]
    countdowns.clear()

    outcomes = [engine.execute_step(step_id=s.id, worker="w") for s in steps]

    assert outcomes[0] == "succeeded"
    assert outcomes[1:] == ["skipped", "skipped"]
    second, third = (Step.objects.get(pk=s.id) for s in steps[1:])
    assert second.status == third.status == StepStatus.QUEUED
    turns = (third.rate_due_at - second.rate_due_at).total_seconds()
    assert turns == pytest.approx(0.2, abs=1e-6)  # one interval apart, in submission order
    assert second.message_due_at == second.rate_due_at
    assert 0 < countdowns[second.id] <= 0.2 and 0.2 < countdowns[third.id] <= 0.4
    assert Attempt.objects.filter(step__in=[second, third]).count() == 0

    countdowns.clear()
    assert engine.execute_step(step_id=third.id, worker="w") == "skipped"  # early
    third.refresh_from_db()
    assert (third.rate_due_at - second.rate_due_at).total_seconds() == pytest.approx(0.2, abs=1e-6)
    assert 0 < countdowns[third.id] <= 0.4


def test_an_operators_override_changes_a_limits_max_at_the_next_start(sent):
    a, b, c = _work(3)
    LimitSetting.objects.create(
        workflow="limited-three", step="work", per="", max=1, reason="the host is slow"
    )
    assert start_attempt(step_id=a.id, worker="w") is not None

    assert engine.execute_step(step_id=b.id, worker="w") == "skipped"
    assert _waited(Step.objects.get(pk=b.id)) == [
        {"step": "work", "scope": SCOPE, "in_use": 1, "of": 1}
    ]

    LimitSetting.objects.filter(workflow="limited-three").update(max=2)  # raised again
    assert engine.sweep().handed_over == [b.id]
    assert engine.execute_step(step_id=b.id, worker="w") == "succeeded"
    assert engine.execute_step(step_id=c.id, worker="w") == "succeeded"  # 1 of 2 in use


def test_an_operators_override_changes_a_rates_pace_at_the_next_start(monkeypatch):
    """`paced` declares 5 a second (a turn every 200 ms); an override of 10 a second
    spaces the next turns 100 ms apart."""
    countdowns: dict[int, float | None] = {}
    monkeypatch.setattr(
        publish, "send", lambda task, arg, countdown=None: countdowns.__setitem__(arg, countdown)
    )
    RateSetting.objects.create(
        workflow="paced", step="tick", per="", starts=10, every_seconds=1.0, reason="faster"
    )
    steps = [Step.objects.get(run=engine.submit_run(workflow="paced", input={})) for _ in range(3)]

    outcomes = [engine.execute_step(step_id=s.id, worker="w") for s in steps]

    assert outcomes == ["succeeded", "skipped", "skipped"]
    second, third = (Step.objects.get(pk=s.id) for s in steps[1:])
    turns = (third.rate_due_at - second.rate_due_at).total_seconds()
    assert turns == pytest.approx(0.1, abs=1e-6)


def test_a_chained_step_over_its_rate_is_put_off_and_its_predecessor_still_succeeds(monkeypatch):
    """A worker starts a step's one successor inside the finish's transaction. A
    successor under a rate whose turn has not come must be put off like any start,
    not take the finish down with it: the predecessor succeeded, once."""
    sent: dict[int, float | None] = {}
    monkeypatch.setattr(
        publish, "send", lambda task, arg, countdown=None: sent.__setitem__(arg, countdown)
    )
    wf = Workflow("paced-chain", version=1, input={})

    @wf.step(kind=PURE)
    def first(ctx):
        return {}

    @wf.step(kind=PURE, after=["first"], rate=Rate(starts=1, every=60.0))
    def second(ctx):
        return {}

    with registered(wf):
        runs = [engine.submit_run(workflow="paced-chain", input={}) for _ in range(2)]
        outcomes = [
            engine.execute_step(
                step_id=Step.objects.get(run=run, name="first").id, worker="w", successors=1
            )
            for run in runs
        ]

    assert outcomes == ["succeeded", "succeeded"]
    steps = {(s.run_id, s.name): s for s in Step.objects.filter(run__in=runs)}
    assert [steps[(r.id, "first")].status for r in runs] == [StepStatus.SUCCEEDED] * 2
    assert Attempt.objects.filter(step=steps[(runs[0].id, "first")]).count() == 1
    assert Attempt.objects.filter(step=steps[(runs[1].id, "first")]).count() == 1
    # The first run's successor took the turn; the second's waits for the next one.
    assert steps[(runs[0].id, "second")].status == StepStatus.SUCCEEDED
    put_off = steps[(runs[1].id, "second")]
    assert put_off.status == StepStatus.QUEUED and put_off.rate_due_at is not None
    assert Attempt.objects.filter(step=put_off).count() == 0
    assert 59 < (sent[put_off.id] or 0) <= 60
