"""Retention: policies and their audit in the admin, the purge's stages on
finished runs only, the compacted registry, verify_history, the run page and the API.
The guarantees that need real worker processes are in tests/integration/test_retention.py.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import IntegrityError, connection, transaction
from django.db.models import F
from django.test import Client
from django.utils import timezone

from examples.models import TargetRecord
from runs import engine
from runs.engine import retention
from runs.engine.tools import LeaseClock, Started, completed_items, context_factory, run_batch
from runs.errors import StepNotRetryable
from runs.management.commands.createoperator import grant_role
from runs.models import (
    Attempt,
    Claim,
    Event,
    MapRegistry,
    RetentionPolicy,
    RetentionPolicyChange,
    RetentionPurge,
    Run,
    RunHistorySummary,
    Step,
    SubmissionKey,
)
from runs.record.history import verify_run
from runs.roles import OPERATORS, VIEWERS
from runs.workflows import registry
from tests.support.api import token_client


# --- helpers -----------------------------------------------------------------------------
def drive(run: Run) -> Run:
    """Execute the run's queued steps in this process until it finishes (a failed run
    leaves the rest of its steps queued)."""
    while Run.objects.filter(pk=run.pk, finished_at__isnull=True).exists() and (
        step := Step.objects.filter(run=run, status="queued").order_by("id").first()
    ):
        engine.execute_step(step_id=step.id, worker="t")
    run.refresh_from_db()
    return run


def finished(workflow: str = "migrate-records", key: str | None = None, **input: Any) -> Run:
    run = engine.submit(workflow=workflow, input=input, key=key).run
    return drive(run)


def age(run: Run, days: int) -> None:
    """Pretend the run finished `days` ago."""
    Run.objects.filter(pk=run.pk).update(finished_at=F("finished_at") - timedelta(days=days))


def default_policy() -> RetentionPolicy:
    return RetentionPolicy.objects.get(workflow="")


def digest_of(value: Any) -> dict[str, Any]:
    """What compaction keeps of a JSON value: PostgreSQL's jsonb text, its size, sha256."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT %s::jsonb::text", [json.dumps(value)])
        text = cursor.fetchone()[0]
    return {
        "compacted": True,
        "size": len(text.encode()),
        "sha256": hashlib.sha256(text.encode()).hexdigest(),
    }


def user(name: str, role: str) -> User:
    u = User.objects.create_user(name, password="pw-for-tests-1")
    grant_role(u, role)
    return u


# --- policies: validation, one default, audit, the admin for operators ---------------------
def test_policy_dedup_window_below_events_or_floor_is_refused_saying_why(db, settings):
    settings.RUNS_RETENTION_MIN_DEDUP_DAYS = 30
    policy = RetentionPolicy(name="short", workflow="w", payload_days=10, event_days=60)
    policy.dedup_days = 40
    with pytest.raises(ValidationError) as refused:
        policy.full_clean()
    (message,) = refused.value.message_dict["dedup_days"]
    assert "must be at least as long as the events window (60 days)" in message
    policy.dedup_days = 20
    policy.event_days = 10
    with pytest.raises(ValidationError) as refused:
        policy.full_clean()
    assert "at least 30 days (RUNS_RETENTION_MIN_DEDUP_DAYS)" in str(refused.value)
    policy.dedup_days = 30
    policy.full_clean()


def test_policy_constraints_hold_in_the_database(db):
    with pytest.raises(IntegrityError, match="retentionpolicy_dedup_longest"):
        with transaction.atomic():
            RetentionPolicy.objects.create(name="x", workflow="w", event_days=50, dedup_days=40)
    with pytest.raises(IntegrityError, match="retentionpolicy_workflow_unique"):
        with transaction.atomic():
            RetentionPolicy.objects.create(name="second default", workflow="")
    assert list(RetentionPolicy.objects.values_list("name", flat=True)) == ["default"]


def test_operator_not_superuser_edits_a_policy_in_the_admin_and_the_change_is_audited(db):
    # Even where the group lost its permissions (a flushed or restored database),
    # making someone an operator grants them again.
    from django.contrib.auth.models import Group

    Group.objects.get_or_create(name=OPERATORS)[0].permissions.clear()
    ann = user("ann", OPERATORS)
    assert (ann.is_staff, ann.is_superuser) == (True, False)
    client = Client()
    client.force_login(ann)
    policy = default_policy()
    page = client.get(f"/admin/runs/retentionpolicy/{policy.pk}/change/")
    assert page.status_code == 200
    form = {
        "name": "default",
        "workflow": "",
        "enabled": "on",
        "payload_days": "7",
        "event_days": "60",
        "dedup_days": "400",
        "changes-TOTAL_FORMS": "0",
        "changes-INITIAL_FORMS": "0",
    }
    answer = client.post(f"/admin/runs/retentionpolicy/{policy.pk}/change/", form)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    policy.refresh_from_db()
    assert (policy.payload_days, policy.event_days, policy.dedup_days) == (7, 60, 400)
    (change,) = RetentionPolicyChange.objects.all()
    assert (change.actor, change.action, change.policy_id) == ("ann", "changed", policy.pk)
    assert (change.old["payload_days"], change.old["dedup_days"]) == (30, 365)
    assert (change.new["payload_days"], change.new["dedup_days"]) == (7, 400)
    # the audit is shown on the policy's page and in its own list
    page = client.get(f"/admin/runs/retentionpolicy/{policy.pk}/change/")
    assert "changes (audit)" in page.content.decode().lower()
    assert "recent purges" in page.content.decode().lower()
    assert client.get("/admin/runs/retentionpolicychange/").status_code == 200
    assert client.get("/admin/runs/retentionpurge/").status_code == 200

    refused = client.post(
        f"/admin/runs/retentionpolicy/{policy.pk}/change/", {**form, "dedup_days": "50"}
    )
    assert refused.status_code == 200
    assert "must be at least as long as the events window (60 days)" in refused.content.decode()
    policy.refresh_from_db()
    assert (policy.dedup_days, RetentionPolicyChange.objects.count()) == (400, 1)

    deleted = client.post(
        f"/admin/runs/retentionpolicy/{policy.pk}/delete/", {"post": "yes"}, follow=False
    )
    assert deleted.status_code == 302
    last = RetentionPolicyChange.objects.order_by("-id").first()
    assert (last.action, last.policy_id, last.old["dedup_days"], last.new) == (
        "deleted",
        None,
        400,
        None,
    )


def test_viewer_cannot_open_retention_policies_in_the_admin(db):
    vic = user("vic", VIEWERS)
    client = Client()
    client.force_login(vic)
    policy = default_policy()
    for path in ("/admin/", f"/admin/runs/retentionpolicy/{policy.pk}/change/"):
        answer = client.get(path)
        assert answer.status_code == 403 and b"not a staff account" in answer.content
    answer = client.post(f"/admin/runs/retentionpolicy/{policy.pk}/change/", {"name": "x"})
    assert answer.status_code == 403
    assert (default_policy().name, RetentionPolicyChange.objects.count()) == ("default", 0)


def test_admin_preview_action_shows_counts_and_touches_nothing(db):
    run = finished(count=5, batch_size=2)
    age(run, 100)
    client = Client()
    client.force_login(user("ann", OPERATORS))
    answer = client.post(
        "/admin/runs/retentionpolicy/",
        {"action": "preview", "_selected_action": [default_policy().pk]},
        follow=True,
    )
    text = answer.content.decode().lower()
    assert "policy default (would touch)" in text
    assert "events: runs 1, events_deleted" in text
    run.refresh_from_db()
    assert (run.payloads_compacted_at, run.compacted_at) == (None, None)
    assert Event.objects.filter(run=run).count() == run.last_seq
    assert RetentionPurge.objects.get().dry_run is True


# --- the purge ----------------------------------------------------------------------------
def test_purge_touches_only_finished_runs_past_each_window(db):
    old = finished(count=5, batch_size=2, key="old-one")  # past payloads and events
    ancient = finished(count=3, batch_size=2, key="ancient")  # past the dedup window too
    recent = finished(count=4, batch_size=2)  # finished yesterday
    active = engine.submit_run(workflow="migrate-records", input={"count": 2, "batch_size": 2})
    age(old, 100)
    age(ancient, 400)
    age(recent, 1)
    age_active_events = Event.objects.filter(run=active).count()
    old_events = old.last_seq
    ancient_claims = Claim.objects.filter(run=ancient).count()
    steps_before = {s.id: s.result for s in Step.objects.filter(run=old)}

    (result,) = retention.apply()

    for run in (old, ancient, recent, active):
        run.refresh_from_db()
    # old: payloads compacted (sizes and digests), events summarized and gone, claims kept
    assert old.input == digest_of({"count": 5, "batch_size": 2})
    for step in Step.objects.filter(run=old):
        expected = None if steps_before[step.id] is None else digest_of(steps_before[step.id])
        assert step.result == expected
    assert Event.objects.filter(run=old).count() == 0
    summary = RunHistorySummary.objects.get(run=old)
    assert (summary.first_seq, summary.last_seq, summary.events_removed) == (
        1,
        old_events,
        old_events,
    )
    assert summary.counts["batch_finished"] == 3
    assert Claim.objects.filter(run=old, item_key__isnull=True).count() == 0  # pure + map
    assert Claim.objects.filter(run=old, item_key__isnull=False).count() == 0  # in registry
    registry = MapRegistry.objects.get(run=old)
    assert (registry.items, registry.watermark, registry.exceptions) == (5, 5, [])
    assert SubmissionKey.objects.filter(run=old).count() == 1
    assert (old.claims_purged_at, old.compacted_at is not None) == (None, True)
    # ancient: claims, registry and submission key gone too
    assert Claim.objects.filter(run=ancient).count() == 0
    assert MapRegistry.objects.filter(run=ancient).count() == 0
    assert SubmissionKey.objects.filter(run=ancient).count() == 0
    assert ancient.claims_purged_at is not None
    # recent and active: untouched
    for run in (recent, active):
        assert (run.payloads_compacted_at, run.compacted_at, run.claims_purged_at) == (None,) * 3
    assert Event.objects.filter(run=recent).count() == recent.last_seq
    assert Event.objects.filter(run=active).count() == age_active_events
    assert Claim.objects.filter(run=recent, item_key__isnull=False, status="succeeded").count() == 4
    # the record of what it did
    purge = RetentionPurge.objects.get(pk=result.purge_id)
    assert purge.finished_at is not None and purge.dry_run is False
    assert purge.counts["events"] == {
        "runs": 2,
        "events_deleted": old_events + ancient.last_seq,
    }
    assert purge.counts["dedup"] == {
        "runs": 1,
        "claims_deleted": ancient_claims - 3,  # its 3 item claims went with the registry
        "registries_deleted": 1,
        "submission_keys_deleted": 1,
    }
    assert purge.counts["registry"]["claims_deleted"] == 5 + 3
    # the compacted runs still verify (the autouse check verifies every run too)
    assert verify_run(old) == [] and verify_run(ancient) == []

    # a second purge finds nothing left to do
    (again,) = retention.apply()
    assert all(not any(c.values()) for c in again.counts.values()), again.counts


def test_preview_counts_what_the_purge_then_does(db):
    for days, count in ((100, 5), (400, 3), (2, 4)):
        age(finished(count=count, batch_size=2, key=f"k{count}"), days)
    (preview,) = retention.apply(dry_run=True)
    events = sum(
        r.last_seq for r in Run.objects.all() if r.finished_at < timezone.now() - timedelta(days=90)
    )
    assert preview.counts["events"] == {"runs": 2, "events_deleted": events}
    assert preview.counts["registry"] == {"steps": 2, "claims_deleted": 8}
    assert Event.objects.count() == sum(r.last_seq for r in Run.objects.all())
    (purge,) = retention.apply()
    assert purge.counts["events"] == preview.counts["events"]
    assert purge.counts["payloads"] == preview.counts["payloads"]
    assert (
        purge.counts["registry"]["claims_deleted"] == preview.counts["registry"]["claims_deleted"]
    )


def test_runs_with_an_open_claim_or_a_running_attempt_are_never_touched(db):
    from tests.support.factories import crashed_merge

    claim = crashed_merge()  # unresolved: the run needs reconciliation
    engine.cancel_run(run_id=claim.run_id, actor="ann", reason="stop")  # cancelled, still open
    run = Run.objects.get(pk=claim.run_id)
    assert run.status == "cancelled"
    age(run, 1000)
    (result,) = retention.apply()
    run.refresh_from_db()
    assert (run.payloads_compacted_at, run.compacted_at, run.claims_purged_at) == (None,) * 3
    assert Event.objects.filter(run=run).count() == run.last_seq
    assert (
        result.counts["events"] == {"runs": 0, "events_deleted": 0} or not result.counts["events"]
    )


def test_apply_retention_command_prints_counts_and_refuses_an_unknown_policy(db):
    age(finished(count=2, batch_size=2), 100)
    out = io.StringIO()
    call_command("apply_retention", "--dry-run", stdout=out)
    assert out.getvalue().startswith("policy default (would touch): registry: steps 1")
    out = io.StringIO()
    call_command("apply_retention", "--policy", "default", stdout=out)
    assert "policy default (in " in out.getvalue()
    assert "events: runs 1, events_deleted" in out.getvalue()
    with pytest.raises(CommandError, match="no retention policy named 'nope' \\(known: default\\)"):
        call_command("apply_retention", "--policy", "nope")


def test_a_compacted_run_cannot_be_retried(db):
    run = finished("map-some-fail", count=4, fail=[1], batch_size=2)
    assert run.status == "failed"
    age(run, 100)
    retention.apply()
    with pytest.raises(StepNotRetryable, match="retention compacted"):
        engine.retry_steps(run_id=run.id, step_keys=["copy_or_fail"], actor="ann")


# --- guarantees (a), (c), (d) -----------------------------------------------------------
def test_a_resubmit_with_the_same_idempotency_key_after_purge_returns_the_same_run(db):
    client = token_client(user("sam", OPERATORS))
    body = {"workflow": "migrate-records", "input": {"count": 3, "batch_size": 2}}
    first = client.post("/api/runs/", body, format="json", HTTP_IDEMPOTENCY_KEY="order-7")
    assert first.status_code == 201
    run = drive(Run.objects.get(pk=first.json()["id"]))
    age(run, 100)
    retention.apply()
    run.refresh_from_db()
    assert run.compacted_at is not None and Event.objects.filter(run=run).count() == 0

    again = client.post("/api/runs/", body, format="json", HTTP_IDEMPOTENCY_KEY="order-7")

    assert again.status_code == 200
    assert again.json()["id"] == str(run.id)
    assert again.json()["compacted"] is True
    assert Run.objects.count() == 1
    other = client.post(
        "/api/runs/", {**body, "input": {"count": 4}}, format="json", HTTP_IDEMPOTENCY_KEY="order-7"
    )
    assert other.status_code == 409


def test_c_compacted_registry_still_skips_every_completed_item_when_a_batch_is_rerun(db):
    run = finished("map-some-fail", count=10, fail=[8], batch_size=3)
    assert run.status == "failed"
    batches = list(Step.objects.filter(run=run, parent__isnull=False).order_by("batch_index"))
    parent_revision = Step.objects.get(run=run, key="copy_or_fail").plan_revision

    def done_now() -> dict[int, set[str]]:
        from runs.engine.tools import keys

        result = {}
        for b in batches:
            pairs = b.items or []
            claim_keys = {
                p["key"]: keys.item_key(run.id, b.name, parent_revision, p["key"]) for p in pairs
            }
            result[b.batch_index] = completed_items(b, pairs, claim_keys)
        return result

    before = done_now()
    # batch 2 (6, 7, 8) stopped at 8 and failed the run: batch 3 never ran
    assert before == {0: {"0", "1", "2"}, 1: {"3", "4", "5"}, 2: {"6", "7"}, 3: set()}
    age(run, 100)
    retention.purge(policy=default_policy(), batch=4)
    registry = MapRegistry.objects.get(run=run)
    assert (registry.items, registry.watermark) == (10, 10)
    assert registry.exceptions == ["8", "9"]
    assert Claim.objects.filter(run=run, item_key__isnull=False).count() == 0
    assert done_now() == before

    # Re-run batch 2's item loop for real against the compacted registry: its two
    # completed items are skipped, the exception is processed, nothing runs twice.
    batch = batches[2]
    workflow = registry_get("map-some-fail")
    stepdef = dataclasses.replace(workflow.steps["copy_or_fail"], fn=record_item)
    attempt = Attempt.objects.create(
        step=batch,
        run=run,
        number=batch.attempts + 1,
        worker="test",
        lease_expires_at=timezone.now() + timedelta(minutes=5),
    )
    started = Started(
        step=batch,
        run=run,
        attempt=attempt,
        workflow=workflow,
        stepdef=stepdef,
        lease=LeaseClock(60),
    )
    rows_before = TargetRecord.objects.filter(run_id=run.id).count()
    counts = run_batch(started, context_factory(started))
    assert counts == {"items": 3, "completed": 1, "skipped": 2}
    assert sorted(
        TargetRecord.objects.filter(run_id=run.id).values_list("record_id", flat=True)
    ) == list(range(9))
    assert TargetRecord.objects.filter(run_id=run.id).count() == rows_before + 1


def registry_get(name: str) -> Any:
    wf = registry.get(name, 1)
    assert wf is not None
    return wf


def record_item(ctx: Any, number: int) -> dict[str, int]:
    TargetRecord.objects.create(record_id=number, run_id=ctx.run_id)
    return {"copied": number}


def test_d_event_log_still_rejects_update_and_delete_outside_retention_after_a_purge(db):
    purged = finished(count=2, batch_size=2)
    kept = finished(count=2, batch_size=2)
    age(purged, 100)
    retention.apply()
    assert Event.objects.filter(run=purged).count() == 0
    event = Event.objects.filter(run=kept).first()
    assert event is not None
    # the purge's SET LOCAL ended with its transactions: this session cannot delete
    with pytest.raises(IntegrityError, match="DELETE outside retention"), transaction.atomic():
        Event.objects.filter(pk=event.pk).delete()
    with pytest.raises(IntegrityError, match="UPDATE of event"), transaction.atomic():
        Event.objects.filter(pk=event.pk).update(type="tampered")
    with pytest.raises(IntegrityError, match="UPDATE of event"), transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL durable_runs.retention = 'on'")
            cursor.execute("UPDATE runs_event SET payload = '{}' WHERE id = %s", [event.pk])
    assert Event.objects.filter(run=kept).count() == kept.last_seq


# --- verify_history, the run page, the API -------------------------------------------------
@pytest.mark.tampers
def test_verify_history_checks_a_compacted_run_against_its_summary(db):
    run = finished(count=5, batch_size=2)
    age(run, 100)
    retention.apply()
    out = io.StringIO()
    call_command("verify_history", str(run.id), stdout=out)
    assert out.getvalue() == "1 run(s) checked, 0 differ\n"
    # a summary that no longer accounts for the removed events is reported
    RunHistorySummary.objects.filter(run=run).update(events_removed=F("events_removed") - 1)
    problems = verify_run(run)
    assert len(problems) == 1 and problems[0].startswith("history: summary says")
    # and the projection kept in the summary is still compared with the rows
    RunHistorySummary.objects.filter(run=run).update(events_removed=F("events_removed") + 1)
    Step.objects.filter(run=run, key="migrate[0]").update(status="failed")
    assert verify_run(run) == ["step migrate[0]: rows say failed, events say succeeded"]


def test_run_page_and_api_show_a_compacted_run(db):
    run = finished(count=3, batch_size=2)
    age(run, 100)
    retention.apply()
    viewer = user("vic", VIEWERS)
    client = Client()
    client.force_login(viewer)
    page = client.get(f"/runs/{run.id}/").content.decode()
    assert "compacted: payloads (sizes and digests kept)" in page
    assert (
        f"Compacted by retention: events 1\u2013{run.last_seq} ({run.last_seq}) were removed"
        in page
    )
    body = token_client(viewer).get(f"/api/runs/{run.id}/").json()
    assert body["compacted"] is True
    assert body["compacted_at"] is not None and body["claims_purged_at"] is None
    assert body["input"]["compacted"] is True


def test_beat_schedules_the_purge_and_its_task_applies_the_policies(db, settings):
    from runs import tasks

    entry = settings.CELERY_BEAT_SCHEDULE["apply-retention"]
    assert (entry["task"], entry["schedule"]) == ("runs.apply_retention", 3600.0)
    run = finished(count=2, batch_size=2)
    age(run, 100)
    line = tasks.apply_retention()
    assert line.startswith("policy default (in ")
    assert "events: runs 1, events_deleted" in line
    run.refresh_from_db()
    assert run.compacted_at is not None
    (purge,) = RetentionPurge.objects.all()
    assert purge.finished_at is not None and purge.counts["events"]["runs"] == 1


def test_a_purge_moves_the_retention_metric_by_what_it_committed(
    db, django_capture_on_commit_callbacks
):
    from prometheus_client import REGISTRY

    def rows(stage: str, action: str) -> float:
        labels = {"stage": stage, "action": action}
        return REGISTRY.get_sample_value("durable_runs_retention_rows_total", labels) or 0.0

    age(finished(count=4, batch_size=2, key="metrics"), 100)
    before = rows("events", "events_deleted"), rows("registry", "claims_deleted")
    with django_capture_on_commit_callbacks(execute=True):
        (purge,) = retention.apply()
    assert rows("events", "events_deleted") - before[0] == purge.counts["events"]["events_deleted"]
    assert rows("registry", "claims_deleted") - before[1] == 4


# --- what the payload stage compacts ---------------------------------------------------------
def test_the_payload_stage_compacts_signal_payloads_and_the_items_of_batches(db):
    """A signal's payload and a batch's items (copies of the mapped step's result) are
    payloads like the run's results: compacted with them, the items' keys kept (the
    registry and verify_history read them). The preview counts the same rows."""
    from runs.models import Signal

    waited = engine.submit_run(workflow="wait-approval", input={"order": 7})
    drive(waited)
    decision = {"approved": True, "by": "someone@example.com"}
    engine.send_signal(run_id=waited.id, name="approval", payload=decision, actor="ann")
    waited = drive(waited)
    assert waited.status == "succeeded"
    mapped = finished(count=3, batch_size=2)
    batches = {b.id: b.items for b in Step.objects.filter(run=mapped, parent__isnull=False)}
    assert sorted(len(items) for items in batches.values()) == [1, 2]
    for run in (waited, mapped):
        age(run, 100)

    (preview,) = retention.apply(dry_run=True)
    (purge,) = retention.apply()

    assert Signal.objects.get(run=waited).payload == digest_of(decision)
    for batch in Step.objects.filter(run=mapped, parent__isnull=False):
        assert batch.items == [
            {"key": pair["key"], "item": digest_of(pair["item"])} for pair in batches[batch.id]
        ]
    assert purge.counts["payloads"] == preview.counts["payloads"]


def test_a_resolved_claim_keeps_its_result_and_evidence_until_the_dedup_window_ends(db):
    """A recorded resolution is final (the database refuses any update of it): the
    payload stage leaves the resolved claim's result and evidence as they are, and
    they go with the claim at the end of the dedup window."""
    from runs.engine import resolve_claim
    from tests.support.factories import crashed_merge

    claim = crashed_merge()
    evidence = {"seen": "merge 1 in the code host's log"}
    resolve_claim(
        claim, "succeeded", actor="ann", note="merged", result={"sha": "abc"}, evidence=evidence
    )
    run = Run.objects.get(pk=claim.run_id)
    assert run.status == "succeeded"
    age(run, 100)

    (preview,) = retention.apply(dry_run=True)
    (purge,) = retention.apply()

    run.refresh_from_db()
    assert run.payloads_compacted_at is not None
    claim.refresh_from_db()
    assert (claim.result, claim.evidence) == ({"sha": "abc"}, {"resolution": evidence})
    assert purge.counts["payloads"] == preview.counts["payloads"]
    age(run, 300)
    retention.apply()
    assert not Claim.objects.filter(run=run).exists()
