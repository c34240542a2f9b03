"""A probe holds its claim under a lease (database clock), like an attempt holds its
step: a probe whose worker died while asking the external system is asked again once
that lease has passed, at most RUNS_PROBE_MAX_TRIES times, then left to the operator."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection

from runs import engine
from runs.engine import reprobe_claim
from runs.engine.tools import probe_module as probe
from runs.engine.tools import publish
from runs.errors import ProbeInFlight
from runs.models import Claim, Event
from runs.record import events
from runs.states import ClaimStatus
from tests.support.factories import crashed_merge, expire_probe_leases, raised


class WorkerDied(BaseException):
    """The probe's worker process ends (SIGKILL, OOM) while it asks the external
    system: nothing after the compare-and-set runs, not even an `except Exception`."""


def db_now():
    with connection.cursor() as cursor:
        cursor.execute("SELECT now()")
        return cursor.fetchone()[0]


def due_claim() -> Claim:
    """An unresolved merge whose probe is due; the merge did not happen."""
    claim = crashed_merge(change_id=4, workflow="merge-change-probed")
    Claim.objects.filter(pk=claim.pk).update(probe_after=db_now() - timedelta(seconds=1))
    return claim


@pytest.fixture
def sent(monkeypatch) -> list[int]:
    """The claim ids of the probe messages published (not sent to a broker)."""
    ids: list[int] = []

    def send(task: str, arg: int, countdown: float | None = None) -> None:
        if task == publish.PROBE_CLAIM:
            ids.append(arg)

    monkeypatch.setattr(publish, "send", send)
    return ids


@pytest.fixture
def sweep_probes(django_capture_on_commit_callbacks):
    """Run the sweeper (and what it publishes on commit); return the claims whose probe
    it sent again."""

    def sweep() -> list[int]:
        with django_capture_on_commit_callbacks(execute=True):
            return engine.sweep().probes

    return sweep


def probe_dying(monkeypatch, asked: list[Any] | None = None) -> None:
    def die(*args: Any, **kwargs: Any) -> None:
        if asked is not None:
            asked.append((args, kwargs))
        raise WorkerDied

    monkeypatch.setattr(probe, "ask_probe", die)


def test_a_probe_whose_worker_died_is_asked_again_once_its_lease_has_passed(
    db, monkeypatch, sent, sweep_probes
):
    claim = due_claim()
    with monkeypatch.context() as m:
        probe_dying(m)
        with pytest.raises(WorkerDied):
            engine.probe_claim(claim_id=claim.id)

    assert sweep_probes() == []  # its lease still runs: that probe may only be slow
    expire_probe_leases()
    assert sweep_probes() == [claim.id]
    assert sent == [claim.id]
    assert sweep_probes() == []  # sent once per ended lease, not at every sweep

    assert engine.probe_claim(claim_id=claim.id) == "not_applied"  # the message arrives
    claim.refresh_from_db()
    assert (claim.status, claim.resolved_by, claim.probe_tries) == (
        ClaimStatus.FAILED,
        "probe",
        2,
    )
    assert claim.probe_lease_expires_at is None  # no probe in progress


def test_a_probe_that_never_completes_is_left_to_the_operator_after_its_tries(
    db, settings, monkeypatch, sent, sweep_probes
):
    settings.RUNS_PROBE_MAX_TRIES = 2
    claim = due_claim()
    with monkeypatch.context() as m:
        probe_dying(m)
        with pytest.raises(WorkerDied):
            engine.probe_claim(claim_id=claim.id)
        expire_probe_leases()
        assert sweep_probes() == [claim.id]
        with pytest.raises(WorkerDied):
            engine.probe_claim(claim_id=claim.id)  # the second try dies too
        expire_probe_leases()
        assert sweep_probes() == []  # no third
    assert sent == [claim.id]

    claim.refresh_from_db()
    assert (claim.status, claim.probe_tries, claim.probe_lease_expires_at) == (
        ClaimStatus.UNRESOLVED,
        2,
        None,
    )
    gave_up = {
        "reason": "the probe never completed: 2 tries, each ended by its lease without an "
        "answer (its worker died or stalled)",
        "tries": 2,
    }
    assert claim.evidence == {"probe": gave_up}
    event = Event.objects.get(run_id=claim.run_id, type=events.PROBE_GAVE_UP)
    assert event.payload == {"key": claim.key, "tries": 2, "evidence": gave_up}
    assert engine.probe_claim(claim_id=claim.id) == "skipped"  # a late duplicate message
    assert sweep_probes() == []

    outcome = reprobe_claim(claim_id=claim.id, actor="ann")  # the operator still can
    assert outcome.answer == "not_applied"
    claim.refresh_from_db()
    assert (claim.status, claim.resolved_by) == (ClaimStatus.FAILED, "probe")


def test_check_again_is_refused_while_another_probe_holds_the_claim(db, monkeypatch):
    claim = due_claim()
    with monkeypatch.context() as m:
        probe_dying(m)
        with pytest.raises(WorkerDied):
            engine.probe_claim(claim_id=claim.id)
    claim.refresh_from_db()
    events_before = Event.objects.count()

    with pytest.raises(ProbeInFlight) as refused:
        reprobe_claim(claim_id=claim.id, actor="ann")

    assert str(refused.value).startswith(
        f"claim {claim.key} is being probed: that probe holds it until "
        f"{claim.probe_lease_expires_at.isoformat(timespec='seconds')} (in "
    )
    assert Event.objects.count() == events_before
    expire_probe_leases()  # that probe's worker died: once its lease has passed...
    assert reprobe_claim(claim_id=claim.id, actor="ann").answer == "not_applied"


def test_a_late_answer_leaves_the_lease_of_the_probe_that_took_over(db, monkeypatch):
    run = raised("fan-out")  # a probe that cannot tell, due at once
    claim = Claim.objects.get(run=run)
    ask = probe.ask_probe
    asked: list[Any] = []
    with monkeypatch.context() as m:
        probe_dying(m, asked)  # stalled, rather: its answer comes after its lease
        with pytest.raises(WorkerDied):
            engine.probe_claim(claim_id=claim.id)
        expire_probe_leases()
        with pytest.raises(WorkerDied):
            engine.probe_claim(claim_id=claim.id)  # a second probe takes over
    claim.refresh_from_db()
    second_lease = claim.probe_lease_expires_at
    assert second_lease is not None and len(asked) == 2

    (first_args, first_kwargs), (second_args, second_kwargs) = asked
    assert ask(*first_args, **first_kwargs).answer == "unknown"  # the first one's, late
    claim.refresh_from_db()
    assert claim.evidence == {"probe": {"reason": "code host audit log unavailable"}}
    assert claim.probe_lease_expires_at == second_lease  # still the second probe's

    assert ask(*second_args, **second_kwargs).answer == "unknown"
    claim.refresh_from_db()
    assert claim.probe_lease_expires_at is None
