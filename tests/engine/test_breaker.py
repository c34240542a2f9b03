"""A step's breaker (runs/engine/policies/breaker.py, docs/operating.md#breakers): after
its threshold of failed or unknown outcomes within its window the engine pauses the step
itself, once, with who (the engine) and why (the counts); not one outcome before. In
process against real PostgreSQL; through real workers: tests/integration/test_breaker.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.db import connection, transaction
from django.test import Client

from runs import engine
from runs.engine.tools import breaker_module
from runs.management.commands.createoperator import grant_role
from runs.models import Attempt, BreakerChange, BreakerSetting, Pause, PauseChange, Run, Step
from runs.principals import ENGINE_BREAKER
from runs.roles import OPERATORS
from runs.states import AttemptStatus, RunStatus, StepStatus
from runs.testing import run_inline
from runs.workflows import PURE, Breaker, Retry, Workflow
from runs.workflows.errors import WorkflowDefinitionError
from tests.support.declared import declared
from tests.support.races import Background, is_waiting_on_lock
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

THRESHOLD = 3

flaky = Workflow("breaker-charge", 1, input={"fail": bool})


@flaky.step(kind=PURE, retry=Retry(max_attempts=1), breaker=Breaker(outcomes=THRESHOLD, within=600))
def charge(ctx):
    if ctx.input["fail"]:
        raise RuntimeError("payment host timed out")
    return "charged"


@flaky.step(kind=PURE, retry=Retry(max_attempts=1))
def receipt(ctx):
    return "sent"


_workflows = declared(flaky)


def fail_once() -> Run:
    return run_inline("breaker-charge", input={"fail": True})


def breaker_pauses() -> list[Pause]:
    return list(Pause.objects.filter(workflow="breaker-charge"))


def test_the_breaker_trips_at_its_threshold_and_not_one_outcome_before():
    for _ in range(THRESHOLD - 1):
        assert fail_once().status == RunStatus.FAILED
    assert breaker_pauses() == []

    fail_once()

    (pause,) = breaker_pauses()
    assert (pause.step, pause.actor) == ("charge", ENGINE_BREAKER)
    assert pause.reason == (
        "breaker: 3 failed or unknown outcomes of charge in the last 600 s (threshold 3)"
    )
    (change,) = PauseChange.objects.filter(workflow="breaker-charge")
    assert (change.action, change.actor, change.pause_id, change.reason) == (
        "pause",
        ENGINE_BREAKER,
        pause.id,
        pause.reason,
    )
    assert change.breaker == {
        "outcomes": 3,
        "threshold": 3,
        "within_seconds": 600.0,
        "overridden": False,
    }


def test_a_tripped_step_stays_queued_in_later_runs_and_an_operators_resume_starts_it():
    for _ in range(THRESHOLD):
        fail_once()
    (pause,) = breaker_pauses()

    later = engine.submit_run(workflow="breaker-charge", input={"fail": False})
    held = Step.objects.get(run=later, name="charge")
    assert engine.execute_step(step_id=held.id, worker="t") == "skipped"

    held.refresh_from_db()
    assert held.status == StepStatus.QUEUED
    assert not Attempt.objects.filter(step=held).exists()
    resumed = engine.resume(pause_id=pause.id, actor="ann", reason="payment host is back")
    assert resumed.republished == [held.id]
    assert engine.execute_step(step_id=held.id, worker="t") == "succeeded"
    assert Pause.objects.count() == 0


def test_outcomes_outside_the_window_do_not_count():
    for _ in range(THRESHOLD - 1):
        fail_once()
    with connection.cursor() as cursor:  # they ended eleven minutes ago: outside 600 s
        cursor.execute("UPDATE runs_attempt SET finished_at = finished_at - interval '11 minutes'")

    fail_once()
    assert breaker_pauses() == []
    fail_once()
    assert breaker_pauses() == []
    fail_once()
    assert len(breaker_pauses()) == 1


def test_successes_deferrals_and_other_steps_do_not_count():
    for _ in range(THRESHOLD * 2):
        assert run_inline("breaker-charge", input={"fail": False}).status == RunStatus.SUCCEEDED
    assert breaker_pauses() == []
    assert Attempt.objects.filter(status=AttemptStatus.SUCCEEDED).count() == THRESHOLD * 4


def test_two_trips_at_once_make_one_pause_and_one_audit_row():
    for _ in range(THRESHOLD - 1):
        fail_once()
    lower = Breaker(outcomes=THRESHOLD - 1, within=600)  # as if both saw the Nth outcome
    with transaction.atomic():
        first = breaker_module.check(workflow="breaker-charge", step="charge", declared=lower)
        assert first is not None  # inserted, not committed
        second = Background(
            lambda: breaker_module.check(workflow="breaker-charge", step="charge", declared=lower)
        )
        wait_for(lambda: is_waiting_on_lock(second.pid), what="the second trip waits")
    second.join()

    assert second.result is None
    assert [p.id for p in breaker_pauses()] == [first.id]
    assert PauseChange.objects.filter(action="pause").count() == 1


def test_a_standing_pause_is_left_as_it_is():
    engine.pause(workflow="breaker-charge", step="charge", actor="ann", reason="maintenance")
    lower = Breaker(outcomes=1, within=600)
    fail_run = engine.submit_run(workflow="breaker-charge", input={"fail": True})
    assert fail_run is not None

    assert breaker_module.check(workflow="breaker-charge", step="charge", declared=lower) is None
    (pause,) = breaker_pauses()
    assert (pause.actor, pause.reason) == ("ann", "maintenance")
    assert PauseChange.objects.count() == 1


def test_after_a_resume_the_count_starts_again_and_the_breaker_trips_again():
    for _ in range(THRESHOLD):
        fail_once()
    (pause,) = breaker_pauses()
    engine.resume(pause_id=pause.id, actor="ann", reason="host is back")

    for _ in range(THRESHOLD - 1):
        fail_once()
    assert breaker_pauses() == []  # the three before the resume no longer count
    fail_once()

    (again,) = breaker_pauses()
    assert again.id != pause.id
    assert again.actor == ENGINE_BREAKER
    assert list(PauseChange.objects.order_by("id").values_list("action", "actor", "pause_id")) == [
        ("pause", ENGINE_BREAKER, pause.id),
        ("resume", "ann", pause.id),
        ("pause", ENGINE_BREAKER, again.id),
    ]


def test_an_override_changes_the_threshold_and_can_switch_the_breaker_off():
    BreakerSetting.objects.create(
        workflow="breaker-charge", step="charge", outcomes=1, within_seconds=60, reason="r"
    )
    fail_once()
    (pause,) = breaker_pauses()
    assert pause.reason == (
        "breaker: 1 failed or unknown outcomes of charge in the last 60 s (threshold 1)"
    )
    assert PauseChange.objects.get(pause_id=pause.id).breaker["overridden"] is True
    engine.resume(pause_id=pause.id, actor="ann", reason="r")

    BreakerSetting.objects.filter(step="charge").update(enabled=False)
    for _ in range(THRESHOLD + 1):
        fail_once()
    assert breaker_pauses() == []


def test_a_step_without_a_breaker_reads_nothing_after_its_failure(django_assert_max_num_queries):
    quiet = Breaker(outcomes=1, within=1)
    assert flaky.steps["receipt"].breaker is None
    with django_assert_max_num_queries(0):
        breaker_module.after_outcome("breaker-charge", flaky.steps["receipt"])
        breaker_module.after_outcome("breaker-charge", None)
    assert quiet.seconds == 1.0


def _declare(**declared):
    wf = Workflow("breaker-declared", 1)  # not registered: declared, never run
    wf.step(kind=PURE, name="s", after=[], **declared)(lambda ctx: None)
    return wf.steps["s"]


def test_a_breaker_is_declared_with_a_timedelta_or_seconds_and_described():
    assert _declare().breaker is None
    step = _declare(breaker=Breaker(outcomes=5, within=timedelta(minutes=1)))
    assert (step.breaker.outcomes, step.breaker.seconds) == (5, 60.0)
    assert _declare(breaker=Breaker(outcomes=1, within=0.5)).breaker.seconds == 0.5
    assert flaky.describe()["steps"][0]["breaker"] == {"outcomes": 3, "within_seconds": 600.0}
    assert "breaker" not in flaky.describe()["steps"][1]


@pytest.mark.parametrize(
    ("outcomes", "within", "says"),
    [
        (0, 60, "Breaker.outcomes must be at least 1, not 0"),
        (-2, 60, "Breaker.outcomes must be at least 1"),
        (2.5, 60, "Breaker.outcomes must be a whole number"),
        (True, 60, "Breaker.outcomes must be a whole number"),
        (3, 0, "Breaker.within must be a positive timedelta or number of seconds, not 0"),
        (3, timedelta(0), "Breaker.within must be a positive"),
        (3, "60", "Breaker.within must be a positive"),
    ],
)
def test_a_breaker_that_cannot_trip_sensibly_is_refused_where_it_is_declared(
    outcomes, within, says
):
    with pytest.raises(WorkflowDefinitionError, match=says):
        Breaker(outcomes=outcomes, within=within)


def test_anything_but_a_breaker_is_refused():
    with pytest.raises(WorkflowDefinitionError, match="breaker must be a Breaker"):
        _declare(breaker={"outcomes": 3})


def test_an_operator_overrides_the_threshold_in_the_admin_and_every_change_is_audited():
    ann = User.objects.create_user("ann", password="pw-for-tests-1")
    grant_role(ann, OPERATORS)
    client = Client()
    client.force_login(ann)
    form = {
        "workflow": "breaker-charge",
        "step": "charge",
        "enabled": "on",
        "outcomes": "1",
        "within_seconds": "30",
        "reason": "the payment host is flaky tonight",
    }
    refused = client.post("/admin/runs/breakersetting/add/", {**form, "step": "receipt"})
    assert refused.status_code == 200
    assert "declares no breaker on step &#x27;receipt&#x27;" in refused.content.decode()
    assert not BreakerSetting.objects.exists()

    added = client.post("/admin/runs/breakersetting/add/", form)
    assert added.status_code == 302, added.content.decode()[:2000]
    setting = BreakerSetting.objects.get()
    changed = client.post(
        f"/admin/runs/breakersetting/{setting.pk}/change/", {**form, "outcomes": "2"}
    )
    assert changed.status_code == 302, changed.content.decode()[:2000]

    created, change = BreakerChange.objects.order_by("id")
    assert (created.actor, created.action, created.old) == ("ann", "created", None)
    assert created.new["outcomes"] == 1
    assert (change.actor, change.action) == ("ann", "changed")
    assert (change.old["outcomes"], change.new["outcomes"]) == (1, 2)
    assert change.new["within_seconds"] == 30.0
    assert client.get("/admin/runs/breakerchange/").status_code == 200

    fail_once()
    assert breaker_pauses() == []  # 2 now, not 3 and not 1
    fail_once()
    (pause,) = breaker_pauses()
    assert pause.reason.endswith("in the last 30 s (threshold 2)")

    deleted = client.post(f"/admin/runs/breakersetting/{setting.pk}/delete/", {"post": "yes"})
    assert deleted.status_code == 302
    last = BreakerChange.objects.order_by("-id").first()
    assert (last.action, last.old["outcomes"], last.new) == ("deleted", 2, None)
