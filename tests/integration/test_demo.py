"""`manage.py demo` (`make demo`): real worker processes, one killed by fault injection,
leave exactly what the dashboard is then to show. The command runs in this process
against pytest's test database; its subprocesses get that database's URL."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from examples.models import FundsHold, Merge
from reconciliation.queries import queue_size, unresolved_queue
from runs import engine
from runs.engine.tools import start_attempt
from runs.management.commands.demo import NOT_PRODUCTION
from runs.models import Attempt, Claim, Run, Step
from runs.states import AttemptStatus, ClaimStatus, RunStatus, StepStatus
from tests.support.factories import enter_effect, expire_leases

pytestmark = pytest.mark.workers

ROOT = Path(__file__).resolve().parents[2]


def test_demo_fills_the_queue_and_the_runs_the_dashboard_shows(transactional_db):
    out, err = io.StringIO(), io.StringIO()
    # A run of the stack's whose worker died in its guarded step: the stack's sweeper
    # handles it, with the stack's grace; the demo's processes must not touch it.
    other = engine.submit_run(workflow="merge-change-probed", input={"change_id": 9})
    step = Step.objects.get(run=other)
    enter_effect(start_attempt(step_id=step.id, worker="the-stacks-worker"))
    expire_leases()

    call_command("demo", "--url", "http://dashboard.test", NOT_PRODUCTION, stdout=out, stderr=err)

    # The stack's run: no sweep of the demo's crashed, probed or republished it.
    attempt = Attempt.objects.get(step=step)
    assert (attempt.status, attempt.error) == (AttemptStatus.RUNNING, "")
    assert Claim.objects.get(run=other).status == ClaimStatus.IN_FLIGHT
    assert Step.objects.get(pk=step.pk).status == StepStatus.RUNNING

    # The queue: two unresolved claims, one with a probe's (inconclusive) evidence, one
    # with the late result of a worker the engine had given up on.
    rows = list(unresolved_queue())
    assert queue_size() == 2, err.getvalue()
    by_workflow = {row.workflow: row for row in rows}
    assert set(by_workflow) == {"merge-change-audited", "merge-change-slow-host"}
    probed, late = by_workflow["merge-change-audited"], by_workflow["merge-change-slow-host"]
    assert probed.has_probe and not probed.late_result
    assert probed.probe_evidence is not None
    assert "proves nothing yet" in probed.probe_evidence["reason"]
    assert late.late_result and late.probe_evidence is None and not late.has_probe
    assert (
        late.evidence["late_result"]["change_id"] == Merge.objects.get(run_id=late.run_id).change_id
    )
    assert Merge.objects.filter(run_id=probed.run_id).count() == 1  # it did merge, then died

    # The runs: one waiting for approval, one failed, one compensated.
    runs = {
        run.id: run for run in Run.objects.exclude(pk__in=[probed.run_id, late.run_id, other.id])
    }
    assert len(runs) == 3
    waiting = [r for r in runs.values() if r.status == RunStatus.WAITING]
    assert len(waiting) == 1 and waiting[0].workflow == "agent-refund"
    assert Step.objects.get(run=waiting[0], name="approval").status == StepStatus.WAITING
    failed = [r for r in runs.values() if r.status == RunStatus.FAILED]
    assert sorted(r.workflow for r in failed) == ["agent-refund", "merge-change-checked"]
    plain = next(r for r in failed if r.workflow == "merge-change-checked")
    compensated = next(r for r in failed if r.workflow == "agent-refund")
    assert not Step.objects.filter(run=plain).exclude(compensates="").exists()
    release = Step.objects.get(run=compensated, compensates="hold_funds")
    assert release.status == StepStatus.SUCCEEDED
    assert FundsHold.objects.get(run_id=compensated.id).released_at is not None

    # One line per scenario with its run's page, then the queue's address.
    lines = out.getvalue().splitlines()
    assert lines[-1] == "open http://dashboard.test/reconciliation/"
    pages = {line.split()[-1] for line in lines[:-1]}
    assert pages == {
        f"http://dashboard.test/runs/{run_id}/" for run_id in [probed.run_id, late.run_id, *runs]
    }
    assert len(lines) == 6


def test_demo_without_a_stack_says_so_in_one_line(tmp_path):
    env = {
        "PATH": "/usr/bin:/bin",
        "SECRET_KEY": "x",
        "DURABLE_RUNS_VAR": str(tmp_path),  # no services.env of a running stack here
        "DATABASE_URL": "postgres://postgres@127.0.0.1:1/nothing",
        "CELERY_BROKER_URL": "redis://127.0.0.1:1/0",
    }
    done = subprocess.run(
        [sys.executable, "manage.py", "demo", "--this-is-not-production"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "cannot reach the stack's database nothing on 127.0.0.1" in lines[0]
    assert "start it with `make up`" in lines[0]
