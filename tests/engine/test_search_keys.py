"""Search keys (docs/authoring.md#search-fields): written in the run's submission
transaction, exactly one row per declared field with a value, nothing for a refused
submission; deleted with the run's payloads by retention; found through
runsearchkey_value_idx."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import F

from runs import engine
from runs.engine import retention
from runs.errors import InvalidInput, SubmissionKeyConflict
from runs.models import Run, RunSearchKey, Step
from runs.reads.summaries import with_search_key


def keys() -> list[tuple[str, str, str, str]]:
    rows = RunSearchKey.objects.order_by("run__created_at", "field")
    return [(str(r.run_id), r.workflow, r.field, r.value) for r in rows]


def test_submit_writes_one_key_per_declared_field_with_the_runs_created_at(db):
    merge = engine.submit_run(workflow="merge-change", input={"change_id": 301})
    order = engine.submit_run(
        workflow="search-order", input={"order": "A-17", "customer": 42, "note": "n"}
    )
    assert keys() == [
        (str(merge.id), "merge-change", "change_id", "301"),
        (str(order.id), "search-order", "customer", "42"),
        (str(order.id), "search-order", "order", "A-17"),
    ]
    key = RunSearchKey.objects.get(run=merge)
    assert key.created_at == merge.created_at


def test_a_workflow_without_search_fields_and_a_none_value_write_no_key(db):
    engine.submit_run(workflow="migrate-records", input={"count": 1})
    run = engine.submit_run(workflow="search-order", input={"order": "B-1", "note": "n"})
    assert keys() == [(str(run.id), "search-order", "order", "B-1")]


def test_a_refused_submission_writes_no_key(db):
    with pytest.raises(InvalidInput):
        engine.submit(workflow="merge-change", input={"change_id": "301"})
    engine.submit(workflow="merge-change", input={"change_id": 5}, key="k")
    with pytest.raises(SubmissionKeyConflict):
        engine.submit(workflow="merge-change", input={"change_id": 6}, key="k")
    again = engine.submit(workflow="merge-change", input={"change_id": 5}, key="k")
    assert again.created is False
    assert [(f, v) for _, _, f, v in keys()] == [("change_id", "5")]


def test_the_filter_finds_exactly_the_runs_with_that_value_newest_first(db):
    first = engine.submit_run(workflow="merge-change", input={"change_id": 301})
    engine.submit_run(workflow="merge-change", input={"change_id": 3010})
    engine.submit_run(workflow="charge-payment", input={"amount": 301})
    second = engine.submit_run(workflow="merge-change-probed", input={"change_id": 301})
    found = with_search_key(Run.objects.all(), "change_id", "301")
    assert [r.id for r in found] == [second.id, first.id]
    assert list(with_search_key(Run.objects.all(), "change_id", "30")) == []


def test_retention_deletes_the_keys_with_the_runs_payloads_and_previews_them(db):
    kept = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    old = engine.submit_run(workflow="merge-change", input={"change_id": 2})
    for run in (kept, old):
        step = Step.objects.get(run=run)
        engine.execute_step(step_id=step.id, worker="t")
    Run.objects.filter(pk=old.pk).update(finished_at=F("finished_at") - timedelta(days=100))

    (preview,) = retention.apply(dry_run=True)
    assert preview.counts["payloads"]["search_keys_deleted"] == 1
    (purge,) = retention.apply()

    assert purge.counts["payloads"]["search_keys_deleted"] == 1
    assert [(f, v) for _, _, f, v in keys()] == [("change_id", "1")]
    old.refresh_from_db()
    assert old.payloads_compacted_at is not None and old.input["compacted"] is True


@pytest.mark.tampers  # runs written behind the engine's back, without events
def test_the_filter_is_served_by_the_search_key_index(db):
    # A few thousand keys of other values, and the planner told not to scan.
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO runs_run (id, workflow, version, input, status, plan_revision, "
            "last_seq, steps_remaining, created_at, updated_at, submitted_by, "
            "submitted_via, error, ends_as) "
            "SELECT gen_random_uuid(), 'merge-change', 1, jsonb_build_object('change_id', n), "
            "'pending', 1, 0, 1, now() - n * interval '1 second', now(), '', '', '', '' "
            "FROM generate_series(1, 3000) n"
        )
        cursor.execute(
            "INSERT INTO runs_runsearchkey (run_id, workflow, field, value, created_at) "
            "SELECT id, workflow, 'change_id', input->>'change_id', created_at FROM runs_run"
        )
        cursor.execute("ANALYZE runs_run")
        cursor.execute("ANALYZE runs_runsearchkey")
        cursor.execute("SET LOCAL enable_seqscan = off")
        query = with_search_key(Run.objects.defer("input", "result"), "change_id", "301")[:51]
        sql, params = query.query.sql_with_params()
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "runsearchkey_value_idx" in plan, plan
    assert "Sort" not in plan, plan  # the index gives the order
    assert len(query) == 1
