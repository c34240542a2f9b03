"""`manage.py demo` is for a development stack: without DEBUG it refuses unless told
--this-is-not-production, it never turns an account `demo-reviewer` it did not make into
an operator, and its processes sweep only the demo's own runs (RUNS_SWEEP_ONLY_RUNS).
The demo itself, on real workers: tests/integration/test_demo.py."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db.models.functions import Now

from runs import engine
from runs.engine.tools import start_attempt
from runs.management.commands.demo import REVIEWER_MARK
from runs.models import Attempt, Claim, Run, Step
from runs.roles import role_of
from runs.states import AttemptStatus, ClaimStatus
from tests.conftest import make_user
from tests.support.factories import earlier, enter_effect, expire_leases

ROOT = Path(__file__).resolve().parents[2]
REFUSAL = (
    "manage.py demo makes an operator account and demo claims in this database's queue "
    "(the webhook and alerts announce them): it runs only with DEBUG on or "
    "--this-is-not-production (`make demo` passes it)"
)
NOT_MINE = (
    "an account {!r} exists that manage.py demo did not make: the demo changes "
    "no account of anyone else's (rename that one, or run the demo on another database)"
)


def test_demo_without_debug_or_the_flag_refuses_in_one_line_and_makes_nothing(db, settings):
    settings.DEBUG = False

    with pytest.raises(CommandError) as refused:
        call_command("demo")

    assert str(refused.value) == REFUSAL
    assert (User.objects.count(), Run.objects.count()) == (0, 0)


def test_demo_refusal_from_manage_py_is_one_line(tmp_path):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "SECRET_KEY": "x",
        "DEBUG": "0",
        "DURABLE_RUNS_VAR": str(tmp_path),
        "DATABASE_URL": "postgres://postgres@127.0.0.1:1/nothing",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "demo"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert (done.returncode, done.stdout, done.stderr) == (1, "", f"CommandError: {REFUSAL}\n")


@pytest.mark.parametrize("name", ["demo-reviewer", "demo-requester"])
@pytest.mark.parametrize("how", ["flag", "DEBUG"])
def test_demo_never_converts_an_account_of_its_names_it_did_not_make(db, settings, how, name):
    settings.DEBUG = how == "DEBUG"
    person = make_user(name, "viewers")
    person.set_password("a person's password 1")
    person.save()
    before = (person.is_staff, person.is_superuser, list(person.groups.values_list("name")))

    with pytest.raises(CommandError) as refused:
        call_command("demo", *(["--this-is-not-production"] if how == "flag" else []))

    assert str(refused.value) == NOT_MINE.format(name)
    person.refresh_from_db()
    after = (person.is_staff, person.is_superuser, list(person.groups.values_list("name")))
    assert after == before == (False, False, [("viewers",)])
    assert person.check_password("a person's password 1")
    assert Run.objects.count() == 0


def test_the_accounts_the_demo_made_are_marked_and_reused(db):
    from runs.management.commands.demo import requester_account, reviewer_account

    made = reviewer_account(), requester_account()
    again = reviewer_account(), requester_account()

    assert [u.pk for u in made] == [u.pk for u in again]
    assert [
        (u.username, u.last_name, u.is_staff, u.has_usable_password(), role_of(u)) for u in again
    ] == [
        ("demo-reviewer", REVIEWER_MARK, True, False, "operators"),
        ("demo-requester", REVIEWER_MARK, False, False, "submitters"),
    ]


# --- the demo's sweeps: its own runs only -------------------------------------------------
def guarded_attempt_died(change_id: int) -> Run:
    run = engine.submit_run(workflow="merge-change-probed", input={"change_id": change_id})
    step = Step.objects.get(run=run)
    enter_effect(start_attempt(step_id=step.id, worker=f"w{change_id}"))
    return run


def test_a_sweep_limited_to_some_runs_crashes_probes_and_republishes_no_other(db, settings):
    own, other = guarded_attempt_died(1), guarded_attempt_died(2)
    queued_own = engine.submit_run(workflow="merge-change", input={"change_id": 3})
    queued_other = engine.submit_run(workflow="merge-change", input={"change_id": 4})
    waiting = Step.objects.filter(run__in=[queued_own, queued_other])
    earlier(list(waiting.values_list("id", flat=True)), 3600)
    expire_leases()
    settings.RUNS_SWEEP_ONLY_RUNS = [str(own.id), str(queued_own.id)]
    settings.RUNS_PROBE_GRACE_SECONDS = 1

    report = engine.sweep()

    assert report.crashed == [Attempt.objects.get(step__run=own).id]
    assert report.republished == [Step.objects.get(run=queued_own).id]
    assert Attempt.objects.get(step__run=other).status == AttemptStatus.RUNNING
    assert Claim.objects.get(run=other).status == ClaimStatus.IN_FLIGHT
    assert Claim.objects.get(run=own).status == ClaimStatus.UNRESOLVED

    # Both claims unresolved (the other by an unlimited sweep, with the stack's grace),
    # and both probes' messages lost an hour ago: the limited sweep sends its own again.
    settings.RUNS_SWEEP_ONLY_RUNS = []
    settings.RUNS_PROBE_GRACE_SECONDS = 30
    assert engine.sweep().crashed == [Attempt.objects.get(step__run=other).id]
    Claim.objects.update(probe_requested_at=Now() - timedelta(hours=1), probed_at=None)
    settings.RUNS_SWEEP_ONLY_RUNS = [str(own.id)]

    assert engine.sweep().probes == [Claim.objects.get(run=own).id]
