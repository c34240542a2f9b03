"""Builders for reconciliation tests. Runs are made by the engine (submit, start,
crash, fail), never by hand, so every run's history still reproduces its rows."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.db import connection

from runs import engine
from runs.engine.tools import Started, renew_lease, start_attempt
from runs.models import Claim, Run, Step
from runs.states import RUN_ACTIVE, ClaimStatus, RunStatus, StepStatus


def expire_leases() -> None:
    """Every running attempt's lease ended a second ago (on the database's clock)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_attempt SET lease_expires_at = now() - interval '1 second' "
            "WHERE status = 'running'"
        )


def due_now() -> None:
    """Every step waiting for its retry is due (on the database's clock)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_step SET next_attempt_at = now() - interval '1 second' "
            "WHERE status = 'retrying'"
        )


def earlier(step_ids: list[int], seconds: float) -> None:
    """Time passes for these steps, on the database's clock: their timestamps move back."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_step SET queued_at = queued_at - make_interval(secs => %(s)s),"
            " next_attempt_at = next_attempt_at - make_interval(secs => %(s)s),"
            " message_due_at = message_due_at - make_interval(secs => %(s)s)"
            " WHERE id = ANY(%(ids)s)",
            {"s": seconds, "ids": step_ids},
        )


def drain(run: Run) -> Run:
    """Run every queued or due step in-process, one at a time in id order, until
    nothing is left that may start: a step of the plan while the run is active, a
    compensation while it compensates."""
    while True:
        due_now()
        run.refresh_from_db()
        ready = Step.objects.filter(run=run, status__in=[StepStatus.QUEUED, StepStatus.RETRYING])
        if run.status == RunStatus.COMPENSATING:
            ready = ready.exclude(compensates="")
        elif run.status not in RUN_ACTIVE:
            return run
        step = ready.order_by("id").first()
        if step is None:
            return run
        engine.execute_step(step_id=step.id, worker="t")


def enter_effect(started: Started) -> None:
    """The attempt passed its last lease check before calling a guarded step's function
    (as the executor does just before the call): from here a death leaves the effect's
    outcome unknown."""
    renew_lease(started.attempt.id, started.lease_seconds, entering_effect=True)


def expire_probe_leases() -> None:
    """Every probe in progress had its lease end a second ago (database clock)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_claim SET probe_lease_expires_at = now() - interval '1 second' "
            "WHERE probe_lease_expires_at IS NOT NULL"
        )


def run_queued(run: Run) -> None:
    """Execute the run's queued steps in-process until none is left, or the run is no
    longer active (then its queued steps would never start)."""
    # A round reads every queued step at once: one `.first()` per step made a run of
    # 700 steps quadratic (seconds per test), as each read scanned the finished ones too.
    active = Run.objects.filter(pk=run.pk, status__in=RUN_ACTIVE)
    while queued := list(
        Step.objects.filter(run=run, status=StepStatus.QUEUED, run__status__in=RUN_ACTIVE)
        .order_by("pk")
        .values_list("pk", flat=True)
    ):
        for step_id in queued:
            if not active.exists():
                return
            engine.execute_step(step_id=step_id, worker="t")


def crashed(workflow: str = "merge-change", count: int = 1, **input: Any) -> list[Claim]:
    """`count` runs whose worker died in the middle of their guarded step: one
    unresolved claim each (cause worker_died), in submission order."""
    if workflow in ("merge-change", "merge-change-probed") and not input:
        inputs = [{"change_id": n + 1} for n in range(count)]
    else:
        inputs = [input] * count
    runs = [engine.submit_run(workflow=workflow, input=data) for data in inputs]
    for n, run in enumerate(runs):
        step = Step.objects.filter(run=run, status=StepStatus.QUEUED).first()
        assert step is not None
        started = start_attempt(step_id=step.id, worker=f"worker-{n}")
        assert started is not None
        enter_effect(started)
    expire_leases()
    assert len(engine.sweep(limit=count).crashed) == count
    claims = {c.run_id: c for c in Claim.objects.filter(run__in=runs)}
    assert all(c.status == ClaimStatus.UNRESOLVED for c in claims.values())
    return [claims[run.id] for run in runs]


def crashed_merge(change_id: int = 1, workflow: str = "merge-change") -> Claim:
    return crashed(workflow, change_id=change_id)[0]


def raised(workflow: str, **input: Any) -> Run:
    """A run executed in-process until nothing is queued (its guarded steps raised)."""
    run = engine.submit_run(workflow=workflow, input=input)
    run_queued(run)
    run.refresh_from_db()
    return run


def operator(name: str = "ann") -> User:
    return User.objects.get_or_create(username=name)[0]


def late_result_after_resolution() -> Run:
    """A hooked-merge run whose paused worker merged, then (while it was paused) the
    sweeper made its claim unresolved and ann resolved it as failed; the worker's late
    result arrives after that resolution."""
    from reconciliation.services import resolve_claim
    from tests.support import workflows as test_workflows

    run = engine.submit_run(workflow="hooked-merge", input={"mode": "return"})

    def operator_decided_meanwhile() -> None:
        expire_leases()
        engine.sweep()
        resolve_claim(Claim.objects.get(run=run), "failed", actor="ann", note="no merge seen")

    test_workflows.HOOKS[str(run.id)] = operator_decided_meanwhile
    assert engine.execute_step(step_id=Step.objects.get(run=run).id, worker="w") == "fenced"
    return run


def probe_contradicting_resolution(change_id: int = 7, requested_by: str = "") -> Claim:
    """A merge-change-probed claim whose merge did happen, resolved by ann as failed
    ("no merge seen") while its probe was asking: the probe's answer, applied, comes
    after the resolution. Returns the claim (resolved, final)."""
    from examples.fakes import CodeHost
    from runs.engine.tools import probe_module as probe

    claim = crashed_merge(change_id=change_id, workflow="merge-change-probed")
    CodeHost().merge(change_id=change_id, run_id=str(claim.run_id))  # it did happen
    Claim.objects.filter(pk=claim.pk).update(probe_after=None)  # due now
    taken = probe._take(claim.id)  # the worker's probe takes the claim, and asks...
    assert taken is not None
    engine.resolve_claim(
        claim.id, "failed", actor=operator("ann"), note="no merge seen"
    )  # meanwhile
    asked = Claim.objects.select_related("run", "step").get(pk=claim.pk)
    stepdef = engine.probe_of(asked.run, asked.step)
    assert stepdef is not None
    outcome = probe.ask_probe(asked, stepdef, requested_by=requested_by, taken=taken)
    assert outcome.superseded, outcome
    asked.refresh_from_db()
    return asked


def late_answer_kept(mode: str = "return") -> Claim:
    """A hooked-merge claim whose worker was paused past its lease inside the effect and
    answered late: the sweeper made the claim unresolved, and the late answer is kept on
    it as evidence (mode "return": late_result, the merge happened; "not_applied":
    late_error NotApplied; "raise": late_error TimeoutError)."""
    from tests.support import workflows as test_workflows

    run = engine.submit_run(workflow="hooked-merge", input={"mode": mode})

    def paused_past_its_lease() -> None:
        expire_leases()
        engine.sweep()

    test_workflows.HOOKS[str(run.id)] = paused_past_its_lease
    assert engine.execute_step(step_id=Step.objects.get(run=run).id, worker="w") == "fenced"
    claim = Claim.objects.get(run=run)
    assert claim.status == ClaimStatus.UNRESOLVED, claim.status
    return claim


def probe_could_not_tell() -> Claim:
    """A fan-out claim (its deploy raised) whose probe answered unknown: the answer is
    kept on the claim as evidence["probe"]."""
    run = raised("fan-out")
    claim = Claim.objects.get(run=run)
    assert engine.probe_claim(claim_id=claim.id) == "unknown"
    claim.refresh_from_db()
    return claim
