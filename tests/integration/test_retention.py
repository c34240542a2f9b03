"""Retention's guarantees that need real processes:

(b) after a run's payloads and events (and later its claims) are purged, a redelivered
    step message, executed by a real worker, performs no effect;
(e) a purge (`manage.py apply_retention` in its own process) killed with SIGKILL in the
    middle of a batch, then run again, ends in the same state as an uninterrupted purge
    of an identical dataset.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from datetime import timedelta
from typing import Any

import pytest
from django.db.models import F

from examples.models import Merge, TargetRecord
from runs import engine
from runs.engine import retention
from runs.models import (
    Attempt,
    Claim,
    Event,
    MapRegistry,
    RetentionPolicy,
    RetentionPurge,
    Run,
    RunHistorySummary,
    Step,
    SubmissionKey,
)
from runs.tasks import execute_step
from tests.operations.test_retention import drive
from tests.support.places import ROOT

from .harness import Cluster
from .helpers import wait_settled


def age(run: Run, days: int) -> None:
    Run.objects.filter(pk=run.pk).update(finished_at=F("finished_at") - timedelta(days=days))


def test_b_redelivered_step_message_after_purge_performs_no_effect(cluster: Cluster):
    # the default policy of migration 0013 (a flushed test database may have lost it)
    RetentionPolicy.objects.get_or_create(
        workflow="",
        defaults={"name": "default", "payload_days": 30, "event_days": 90, "dedup_days": 365},
    )
    cluster.worker()
    merge = engine.submit_run(workflow="merge-change", input={"change_id": 42})
    migrate = engine.submit_run(workflow="migrate-records", input={"count": 6, "batch_size": 2})
    for run in (merge, migrate):
        assert wait_settled(run, cluster).status == "succeeded"
    assert Merge.objects.filter(change_id=42).count() == 1
    assert TargetRecord.objects.filter(run_id=migrate.id).count() == 6
    steps = list(Step.objects.filter(run__in=[merge, migrate]).values_list("id", flat=True))
    attempts = Attempt.objects.count()

    for days, marker_change in ((100, 43), (300, 44)):
        # 100 days: payloads and events purged, claims kept; 400: claims gone too
        for run in (merge, migrate):
            age(run, days)
        retention.apply()
        for run in (merge, migrate):
            run.refresh_from_db()
            assert run.compacted_at is not None and run.payloads_compacted_at is not None
            assert Event.objects.filter(run=run).count() == 0
        assert (merge.claims_purged_at is None) == (days == 100)

        for step_id in steps:  # every step's message, delivered again
            execute_step.delay(step_id)
        # The worker (solo pool, one message at a time, in order) has consumed them all
        # once a run submitted after them has finished.
        marker = engine.submit_run(workflow="merge-change", input={"change_id": marker_change})
        assert wait_settled(marker, cluster).status == "succeeded"

        assert Merge.objects.filter(change_id=42).count() == 1
        assert TargetRecord.objects.filter(run_id=migrate.id).count() == 6
        assert Attempt.objects.exclude(run=marker).count() == attempts
        for run in (merge, migrate):
            assert Event.objects.filter(run=run).count() == 0
            assert set(Step.objects.filter(run=run).values_list("status", flat=True)) == {
                "succeeded"
            }
        attempts = Attempt.objects.count()


# --- (e) ----------------------------------------------------------------------------------
DATASET = [  # (count, failing items, batch size, submission key?, finished days ago)
    (10, [8], 3, True, 400),  # past every window
    (7, [], 2, False, 100),  # past payloads and events: claims and registry stay
    (12, [], 5, True, 400),
    (5, [0], 2, False, 50),  # past payloads only
    (9, [4], 4, True, 100),
    (6, [], 2, False, 1),  # untouched
]
EXPECTED_MARKS = {400: (True, True, True), 100: (True, True, False), 50: (True, False, False)}


def make_dataset(workflow: str) -> None:
    for count, fail, size, keyed, days in DATASET:
        key = f"{workflow}-{count}" if keyed else None
        run = engine.submit(
            workflow=workflow, input={"count": count, "fail": fail, "batch_size": size}, key=key
        ).run
        drive(run)
        age(run, days)


def state(workflow: str) -> list[dict[str, Any]]:
    """Everything retention may change, for the workflow's runs in dataset order, with
    each run's id replaced by RUN (claim keys contain it) and no timestamps."""
    out = []
    for run in Run.objects.filter(workflow=workflow).order_by("created_at"):
        rid = str(run.id)

        def norm(value: Any, rid: str = rid) -> Any:
            return None if value is None else type(value)(str(value).replace(rid, "RUN"))

        summary = RunHistorySummary.objects.filter(run=run).first()
        out.append(
            {
                "input": run.input,
                "result": run.result,
                "status": run.status,
                "marks": (
                    run.payloads_compacted_at is not None,
                    run.compacted_at is not None,
                    run.claims_purged_at is not None,
                ),
                "events": list(Event.objects.filter(run=run).values_list("seq", "type")),
                "summary": None
                if summary is None
                else (
                    summary.events_removed,
                    summary.counts,
                    summary.first_seq,
                    summary.last_seq,
                    summary.projection,
                ),
                "steps": list(
                    Step.objects.filter(run=run)
                    .order_by("key")
                    .values_list("key", "status", "result")
                ),
                "claims": sorted(
                    (norm(k), s, str(r), i)
                    for k, s, r, i in Claim.objects.filter(run=run).values_list(
                        "key", "status", "result", "item_key"
                    )
                ),
                "registries": list(
                    MapRegistry.objects.filter(run=run).values_list(
                        "step__key", "items", "batch_size", "watermark", "exceptions"
                    )
                ),
                "submission_keys": SubmissionKey.objects.filter(run=run).count(),
            }
        )
    return out


@pytest.mark.parametrize(
    "fault",
    ["retention-registry:3", "retention-payloads:2", "retention-events:3", "retention-dedup:2"],
)
def test_e_purge_killed_mid_batch_then_rerun_ends_like_an_uninterrupted_purge(
    cluster: Cluster, fault: str
):
    make_dataset("map-some-fail")
    make_dataset("map-some-fail-twin")
    assert state("map-some-fail") == state("map-some-fail-twin")  # identical datasets
    for workflow in ("map-some-fail", "map-some-fail-twin"):
        RetentionPolicy.objects.create(
            name=workflow, workflow=workflow, payload_days=30, event_days=90, dedup_days=365
        )
    env = cluster.env(RUNS_RETENTION_BATCH="8")

    killed = subprocess.run(
        [sys.executable, "manage.py", "apply_retention", "--policy", "map-some-fail"],
        cwd=ROOT,
        env={**env, "RUNS_ALLOW_FAULTS": "1", "RUNS_FAULTS": f"after_effect:{fault}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-3000:]
    first = RetentionPurge.objects.get(policy_name="map-some-fail")
    assert first.finished_at is None  # it never got to the end
    assert state("map-some-fail") != state("map-some-fail-twin")  # it did stop half-way

    again = subprocess.run(
        [sys.executable, "manage.py", "apply_retention", "--policy", "map-some-fail"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr[-3000:]
    retention.purge(policy=RetentionPolicy.objects.get(name="map-some-fail-twin"))

    interrupted, uninterrupted = state("map-some-fail"), state("map-some-fail-twin")
    assert interrupted == uninterrupted
    # and that state is the purged one: each run as far as its windows say
    assert [s["marks"] for s in interrupted] == [
        EXPECTED_MARKS.get(days, (False, False, False)) for *_, days in DATASET
    ]
    assert [s["events"] == [] for s in interrupted] == [d >= 90 for *_, d in DATASET]
    assert [s["registries"] != [] for s in interrupted] == [30 < d < 365 for *_, d in DATASET]
    assert RetentionPurge.objects.filter(policy_name="map-some-fail").count() == 2
