"""The engine's per-step statements are prepared once per connection (runs/sql/prepared.py),
and RUNS_PREPARED_STATEMENTS=0, or a connection whose settings name a pooler, prepares
nothing (through a real PgBouncer: tests/integration/test_pgbouncer.py)."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import override_settings

from runs import engine
from runs.models import Run, Step
from runs.states import RunStatus
from tests.support.races import Background

pytestmark = pytest.mark.django_db(transaction=True)


def prepared_statements() -> list[tuple[str, int]]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement, generic_plans FROM pg_prepared_statements")
        return list(cursor.fetchall())


def run_two_chains() -> None:
    for _ in range(2):
        run = engine.submit_run(workflow="pure-chain", input={})
        first = Step.objects.get(run=run, name="first")
        engine.execute_step(step_id=first.id, worker="t", successors=5)
        assert Run.objects.get(pk=run.id).status == RunStatus.SUCCEEDED


def test_the_start_and_the_finish_are_prepared_once_and_reused():
    connection.close()  # a session of its own
    run_two_chains()

    statements = prepared_statements()
    start = [g for s, g in statements if "INSERT INTO runs_attempt" in s and "fenced" not in s]
    finish = [g for s, g in statements if "steps_remaining - 1" in s and "fenced" in s]
    # One prepared statement each, planned once (generic) and run for every step of both
    # runs: `first` by the start, then its finish that starts `second` (succeed_and_start),
    # then `second`'s finish (succeed_and_dependents).
    assert len(start) == 1 and len(finish) == 2
    assert start[0] >= 2 and all(generic >= 2 for generic in finish)


@override_settings(RUNS_PREPARED_STATEMENTS=False)
def test_with_prepared_statements_off_nothing_is_prepared():
    connection.close()
    run_two_chains()

    assert prepared_statements() == []


def test_a_connection_whose_settings_name_a_pooler_prepares_nothing():
    def chains_then_prepared() -> list[tuple[str, int]]:
        run_two_chains()
        return prepared_statements()

    database = {**connection.settings_dict, "POOLER": "pgbouncer"}

    assert Background(chains_then_prepared, database=database).join() == []
