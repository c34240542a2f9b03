"""The workers page (/workers/, runs/web/workers.py) from rows the engine and the
workers write: which worker runs which attempt, who is silent, what waits for a free
worker and since when (the database's clock), and the broker's queues; a fixed number of
queries however many workers and attempts there are. Real workers writing these rows
are in tests/integration/test_workers_page.py."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings

from runs import engine
from runs.engine.tools import start_attempt
from runs.models import Attempt, Run, Step, WorkerProcess
from runs.states import RUN_ACTIVE, RunStatus, StepStatus
from tests.pages.test_query_budgets import LAYOUT

# The waiting steps with the database's clock, the worker rows, the running attempts,
# the concurrency limits in use.
WORKERS_PAGE = 4
HTMX_LIVE = {"HX-Request": "true", "HX-Target": "workers-live"}


def worker(n: int, *, pids: list[int] | None = None) -> WorkerProcess:
    return WorkerProcess.objects.create(
        name=f"w{n}@host-a", host="host-a", pid=1000 + n, pool_pids=pids or [1000 + n]
    )


def running_attempt(worker_name: str) -> Attempt:
    """A run whose first step an attempt of `worker_name` ("host:pid") runs now."""
    run = engine.submit_run(workflow="pure-chain", input={})
    step = Step.objects.get(run=run, status=StepStatus.QUEUED)
    started = start_attempt(step_id=step.id, worker=worker_name)
    assert started is not None
    return started.attempt


def queued_runs(n: int) -> list[Step]:
    """`n` runs whose first step waits for a worker."""
    runs = [engine.submit_run(workflow="pure-chain", input={}) for _ in range(n)]
    return [Step.objects.get(run=r, status=StepStatus.QUEUED) for r in runs]


@pytest.mark.parametrize(("workers", "attempts"), [(1, 1), (12, 30)])
def test_the_page_makes_the_same_queries_whatever_the_number_of_workers_and_attempts(
    operator_client, django_assert_num_queries, workers, attempts
):
    rows = [worker(n) for n in range(workers)]
    for i in range(attempts):
        w = rows[i % workers]
        running_attempt(f"{w.host}:{w.pid}")
    queued_runs(2)
    for headers in ({}, HTMX_LIVE):
        with django_assert_num_queries(LAYOUT + WORKERS_PAGE, info=f"{workers} workers"):
            response = operator_client.get("/workers/", headers=headers)
        assert response.status_code == 200
        assert response.context["page"].running == attempts


def test_each_attempt_is_listed_under_the_process_that_runs_it(operator_client):
    solo = worker(1)
    prefork = worker(2, pids=[2001, 2002])
    mine = running_attempt("host-a:1001")
    childs = running_attempt("host-a:2002")
    stray = running_attempt("host-b:77")  # a process with no worker row

    response = operator_client.get("/workers/")
    page = response.context["page"]
    by_name = {w.name: w for w in page.workers}
    assert [a.id for a in by_name[solo.name].attempts] == [mine.id]
    assert [a.id for a in by_name[prefork.name].attempts] == [childs.id]
    assert [a.id for a in page.unreported] == [stray.id]
    assert not any(w.silent for w in page.workers)
    html = response.content.decode()
    # Each attempt links to its run's page, named by its step.
    for attempt in (mine, childs, stray):
        assert f'<a href="/runs/{attempt.run_id}/">first</a>' in html
    assert "pool 2001, 2002" in html
    assert "silent" not in html


def test_a_worker_is_silent_once_its_heartbeat_is_older_than_a_lease(operator_client):
    quiet, fresh = worker(1), worker(2)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_workerprocess SET heartbeat_at = now() - interval '61 seconds' "
            "WHERE id = %s",
            [quiet.id],
        )
    quiet.refresh_from_db()
    with override_settings(RUNS_LEASE_SECONDS=60):
        page = operator_client.get("/workers/").context["page"]
    by_name = {w.name: w for w in page.workers}
    assert by_name[quiet.name].silent and by_name[quiet.name].silent_since == quiet.heartbeat_at
    assert not by_name[fresh.name].silent
    assert page.silent == 1


def test_a_worker_whose_attempt_lease_expired_unrenewed_is_silent(operator_client):
    w = worker(1)
    attempt = running_attempt("host-a:1001")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_attempt SET lease_expires_at = now() - interval '1 second' WHERE id = %s",
            [attempt.id],
        )
    attempt.refresh_from_db()
    response = operator_client.get("/workers/")
    row = response.context["page"].workers[0]
    assert row.name == w.name and not row.heartbeat_stale
    assert row.silent and row.silent_since == attempt.lease_expires_at
    assert "not renewed" in response.content.decode()


def test_waiting_steps_and_the_oldest_wait_are_exact_on_the_database_clock(operator_client):
    steps = queued_runs(3)
    running_attempt("host-a:1")  # started: no longer waiting
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_step SET queued_at = now() - interval '90 seconds' WHERE id = %s "
            "RETURNING queued_at",
            [steps[1].id],
        )
        (oldest,) = cursor.fetchone()
    page = operator_client.get("/workers/").context["page"]
    assert page.waiting == 3
    assert page.oldest_queued_at == oldest
    assert page.oldest_wait == page.now - oldest
    assert timedelta(seconds=90) <= page.oldest_wait < timedelta(seconds=120)


def test_a_cancelled_runs_queued_steps_are_not_waiting_and_the_oldest_wait_is_real(
    operator_client,
):
    """A cancelled run's queued steps (its map batches, say) wait for nothing: they go
    back to pending as it stops. A failed run's leftover queued step (a branch beside
    the one that failed) is not counted either, however old, and the oldest wait is
    since the oldest step that can start became ready."""
    cancelled, live = queued_runs(2)
    engine.cancel_run(run_id=cancelled.run_id, actor="ann", reason="wrong input")
    cancelled.refresh_from_db()
    assert cancelled.status == StepStatus.PENDING
    failed = engine.submit_run(workflow="fork-join", input={})
    engine.execute_step(step_id=Step.objects.get(run=failed, name="failing_branch").id, worker="t")
    leftover = Step.objects.get(run=failed, name="late_branch")
    assert (Run.objects.get(pk=failed.id).status, leftover.status) == ("failed", "queued")
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_step SET queued_at = now() - interval '35 minutes' WHERE id = %s",
            [leftover.id],
        )
        cursor.execute(
            "UPDATE runs_step SET queued_at = now() - interval '90 seconds' WHERE id = %s "
            "RETURNING queued_at",
            [live.id],
        )
        (oldest,) = cursor.fetchone()
    page = operator_client.get("/workers/").context["page"]
    assert page.waiting == 1
    assert page.oldest_queued_at == oldest
    assert page.oldest_wait == page.now - oldest


FINISHED_RUNS = 20_000


@pytest.mark.tampers  # finished runs written in SQL, without their events
def test_the_waiting_count_is_read_from_the_waiting_steps_index(db):
    """With the tables as they are in service (many finished steps, a few waiting) and
    their statistics read, the count and the minimum come from step_waiting_idx. (On
    empty tables the plan is a coin toss: once ANALYZE has seen them empty, as
    autovacuum may at any moment, another index is as cheap.)"""
    from runs.web.workers import SQL

    for _ in range(3):
        engine.submit_run(workflow="pure-chain", input={})
    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO runs_run (id, workflow, version, input, status, plan_revision,
                                  last_seq, steps_remaining, error, ends_as, submitted_by,
                                  submitted_via, finished_at)
            SELECT md5('finished-' || g)::uuid, 'pure-chain', 1, '{}', 'succeeded', 1, 0, 0,
                   '', '', '', '', now()
            FROM generate_series(1, %(n)s) AS g;
            INSERT INTO runs_step (run_id, key, name, kind, status, depends_on, pending_deps,
                                   plan_revision, claim_generation, attempts,
                                   deferred_attempts, max_attempts, queued_at, error,
                                   compensates, created_at, finished_at)
            SELECT md5('finished-' || g)::uuid, 'first', 'first', 'pure', 'succeeded', '{}',
                   0, 1, 1, 1, 0, 3, now(), '', '', now(), now()
            FROM generate_series(1, %(n)s) AS g;
            ANALYZE runs_run;
            ANALYZE runs_step;
            """,
            {"n": FINISHED_RUNS},
        )
        cursor.execute(
            "EXPLAIN " + SQL["waiting"],
            {
                "queued": StepStatus.QUEUED.value,
                "retrying": StepStatus.RETRYING.value,
                "active": list(RUN_ACTIVE),
                "compensating": [RunStatus.COMPENSATING.value],
            },
        )
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "step_waiting_idx" in plan, plan
    # The pause lookup is made once per step, not once per aggregate that reads it.
    assert plan.count("SubPlan") <= 1, plan


def test_nothing_waiting_and_no_worker_says_so(viewer_client):
    html = viewer_client.get("/workers/").content.decode()
    assert "0</span> queued steps" in html
    assert "No worker reports itself" in html


@pytest.mark.broker
def test_each_queue_says_what_it_carries(viewer_client, settings):
    """The control queue carries batches and the webhook too (config/settings.py
    CONTROL_TASKS), not only the recovery's work its name recalls."""
    response = viewer_client.get("/workers/")
    assert response.context["page"].broker_error == ""
    roles = {q.name: q.role for q in response.context["page"].queues}
    assert roles == {
        settings.CELERY_TASK_DEFAULT_QUEUE: "steps",
        settings.CELERY_RECOVERY_QUEUE: "control: batches, sweeps, probes, schedules, webhook",
    }
    assert "<td>control: batches, sweeps, probes, schedules, webhook</td>" in (
        response.content.decode()
    )


def test_a_broker_that_cannot_be_read_is_said_on_the_page(operator_client):
    with override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0"):
        response = operator_client.get("/workers/")
    assert response.status_code == 200
    assert "The broker could not be read" in response.content.decode()
    assert response.context["page"].queues == []


def test_the_page_asks_for_a_viewer(client, submitter):
    assert client.get("/workers/").status_code == 302  # to the login page
    client.force_login(submitter)
    assert client.get("/workers/").status_code == 403
