"""The event log is append-only and reproduces the rows
(docs/architecture.md#history-and-restore)."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from runs import engine
from runs.models import Event, Step
from runs.record.history import project, verify_run


def finished_migration():
    run = engine.submit_run(workflow="migrate-records", input={"count": 5, "batch_size": 2})
    while step := Step.objects.filter(run=run, status="queued").first():
        engine.execute_step(step_id=step.id, worker="t")
    run.refresh_from_db()
    assert run.status == "succeeded"
    return run


def test_projection_reproduces_steps_claims_and_batches(db):
    run = finished_migration()
    p = project(run.id)
    assert p.run_status == "succeeded"
    assert p.steps == {
        "list_records": "succeeded",
        "migrate": "succeeded",
        "migrate[0]": "succeeded",
        "migrate[1]": "succeeded",
        "migrate[2]": "succeeded",
    }
    assert p.batches == {"migrate[0]": (2, 2, 0), "migrate[1]": (2, 2, 0), "migrate[2]": (1, 1, 0)}
    assert verify_run(run) == []


def test_events_reject_update_and_delete_outside_retention(db):
    run = finished_migration()
    event = Event.objects.filter(run=run).first()
    with pytest.raises(IntegrityError, match="append-only: UPDATE"), transaction.atomic():
        Event.objects.filter(pk=event.pk).update(type="edited")
    with pytest.raises(IntegrityError, match="DELETE outside retention"), transaction.atomic():
        Event.objects.filter(pk=event.pk).delete()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL durable_runs.retention = 'on'")
        cursor.execute("DELETE FROM runs_event WHERE id = %s", [event.pk])
    assert not Event.objects.filter(pk=event.pk).exists()


def test_verify_history_passes_on_engine_runs(db, capsys):
    run = finished_migration()
    call_command("verify_history", str(run.id))
    assert "1 run(s) checked, 0 differ" in capsys.readouterr().out


@pytest.mark.tampers
def test_verify_history_fails_on_rows_altered_behind_the_engines_back(db, capsys):
    run = finished_migration()
    Step.objects.filter(run=run, key="migrate[1]").update(status="failed")
    with connection.cursor() as cursor:  # and lose one item of another batch
        cursor.execute("DELETE FROM runs_claim WHERE run_id = %s AND item_key = '1'", [run.id])

    with pytest.raises(SystemExit) as exit_info:
        call_command("verify_history")

    assert exit_info.value.code == 1
    out = capsys.readouterr().out
    assert f"DIFFERS {run.id}" in out
    assert "step migrate[1]: rows say failed, events say succeeded" in out
    assert (
        "batch migrate[0]: 2 items; events say 2 completed + 0 skipped of 2; registry has 1" in out
    )


def test_verify_history_unknown_run(db):
    from django.core.management import CommandError

    with pytest.raises(CommandError, match="no run with id"):
        call_command("verify_history", "00000000-0000-0000-0000-000000000001")
