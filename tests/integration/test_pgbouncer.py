"""The engine behind a real PgBouncer (Debian's 1.18) in transaction mode, with one server
connection for all its clients: every client's transactions run on the same PostgreSQL
session, in turn. Prepared statements, being per session, would collide there; the engine
prepares none when told (DATABASE_POOLER) or when it sees the pooler (docs/operating.md,
"PgBouncer")."""

from __future__ import annotations

import configparser
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
import yaml
from django.conf import settings
from django.db import connection
from django.db.utils import ProgrammingError
from django.test import override_settings

from config.database import default_database
from examples.models import TargetRecord
from runs import engine
from runs.models import Run, Step
from runs.sql.dburl import database_url
from runs.states import RunStatus, StepStatus
from tests.support.races import Background, backend_pid

from .helpers import wait_settled
from .servers import PrivatePgBouncer

pytestmark = pytest.mark.django_db(transaction=True)


def drive(workflow: str, input: dict[str, Any]) -> Run:
    """Submit a run and execute its queued steps in this thread until none is left."""
    run = engine.submit_run(workflow=workflow, input=input)
    while queued := list(
        Step.objects.filter(run=run, status=StepStatus.QUEUED)
        .order_by("id")
        .values_list("id", flat=True)
    ):
        for step_id in queued:
            engine.execute_step(step_id=step_id, worker="pooled", successors=5)
    run.refresh_from_db()
    return run


def workload(marker: Path) -> tuple[list[Run], set[int]]:
    """Chains, a transactional map in batches, a guarded, an idempotent and a
    transactional step; and the PostgreSQL sessions this thread's transactions ran on."""
    runs, sessions = [], {backend_pid()}
    for workflow, input in [
        ("pure-chain", {}),
        ("pure-chain", {}),
        ("migrate-records", {"count": 12, "batch_size": 5}),
        ("merge-change", {"change_id": 7}),
        ("charge-payment", {"amount": 5}),
        ("slow-write", {"marker": str(marker), "hold": 0.0}),
    ]:
        runs.append(drive(workflow, input))
        sessions.add(backend_pid())
    return runs, sessions


def in_two_threads(database: dict[str, Any], tmp_path: Path) -> tuple[list[Run], set[int]]:
    """The workload in two threads at once, each with its own connection to `database`."""
    threads = [
        Background(lambda n=n: workload(tmp_path / f"marker{n}"), database=database)
        for n in range(2)
    ]
    runs: list[Run] = []
    sessions: set[int] = set()
    for thread in threads:
        done, seen = thread.join(timeout=120)
        runs += done
        sessions |= seen
    return runs, sessions


def prepared_on_the_server(pooler: PrivatePgBouncer) -> list[str]:
    """The prepared statements of the pooler's one server session."""
    with psycopg.connect(pooler.conninfo(), autocommit=True) as conn:
        rows = conn.execute("SELECT name FROM pg_prepared_statements").fetchall()
    return [name for (name,) in rows]


def configured_for(pooler: PrivatePgBouncer) -> dict[str, Any]:
    """The test database's settings dict as config/database.py makes it for DATABASE_URL
    naming this pooler and DATABASE_POOLER=pgbouncer."""
    configured = default_database(
        pooler.url(),
        pooler="pgbouncer",
        # PgBouncer refuses a client that sends any: were these sent, nothing would connect.
        server_options=["-c plan_cache_mode=force_generic_plan"],
        connect_timeout=5,
    )
    return {**connection.settings_dict, **configured}


def test_with_database_pooler_set_two_threads_run_steps_on_one_server_session(
    start_pgbouncer, tmp_path
):
    pooler = start_pgbouncer()  # PgBouncer's defaults: unknown startup options refused

    runs, sessions = in_two_threads(configured_for(pooler), tmp_path)

    assert len(sessions) == 1, "both threads' transactions ran on one server session"
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * len(runs)
    assert prepared_on_the_server(pooler) == []


def test_behind_pgbouncer_with_nothing_configured_the_engine_sees_it_and_prepares_nothing(
    start_pgbouncer, tmp_path, caplog
):
    # An operator put PgBouncer in front and changed nothing else; this PgBouncer drops
    # the startup options it does not know (instead of refusing the connection).
    pooler = start_pgbouncer(ignore_startup_parameters="options")

    runs, sessions = in_two_threads(pooler.through(connection.settings_dict), tmp_path)

    assert len(sessions) == 1, "both threads' transactions ran on one server session"
    assert [r.status for r in runs] == [RunStatus.SUCCEEDED] * len(runs)
    assert prepared_on_the_server(pooler) == []
    warned = [r for r in caplog.records if r.name == "runs.sql.prepared"]
    assert len(warned) == 2, "once per connection"
    assert "Set DATABASE_POOLER=pgbouncer" in warned[0].getMessage()


@override_settings(RUNS_PREPARED_STATEMENTS=True)
def test_prepared_statements_forced_on_collide_behind_pgbouncer_1_18(start_pgbouncer):
    """What RUNS_PREPARED_STATEMENTS=1 does behind a PgBouncer that does not keep them:
    the second client's first statement is named as the first client's was."""
    pooler = start_pgbouncer()
    database = configured_for(pooler)

    first = Background(lambda: drive("pure-chain", {}), database=database)
    assert first.join().status == RunStatus.SUCCEEDED
    second = Background(lambda: drive("pure-chain", {}), database=database)

    with pytest.raises(ProgrammingError, match='prepared statement "_pg3_0" already exists'):
        second.join()


@pytest.mark.parametrize("disabled", [True, False], ids=["as configured", "server-side cursors"])
def test_iterator_in_autocommit_behind_pgbouncer_reads_every_row(start_pgbouncer, disabled):
    """Django declares an iterator()'s cursor WITH HOLD in autocommit: it stays on the
    server session of its first chunk, which another client may hold by the next one."""
    pooler = start_pgbouncer(default_pool_size="2")
    database = {**configured_for(pooler), "DISABLE_SERVER_SIDE_CURSORS": disabled}
    run_id = uuid.uuid4()
    TargetRecord.objects.bulk_create(TargetRecord(record_id=n, run_id=run_id) for n in range(6))

    def read(holder: psycopg.Connection[Any]) -> list[int]:
        rows = TargetRecord.objects.filter(run_id=run_id).order_by("record_id").iterator(2)
        first = [next(rows).record_id]
        # The one server connection open so far, just left by this thread's fetch.
        holder.execute("SELECT 1")
        return first + [row.record_id for row in rows]

    with psycopg.connect(pooler.conninfo()) as holder:  # holds it in a transaction
        reader = Background(lambda: read(holder), database=database)
        if disabled:
            assert reader.join() == list(range(6))
        else:
            # Django's error, or psycopg's own from closing that cursor afterwards.
            with pytest.raises(
                (ProgrammingError, psycopg.ProgrammingError), match=r"cursor .* does not exist"
            ):
                reader.join()


@pytest.mark.workers
def test_celery_workers_behind_pgbouncer_run_maps_and_chains(start_pgbouncer, cluster):
    pooler = start_pgbouncer()
    # Through the URL, as a deployment may say it (?pooler=pgbouncer). The database it
    # names exists only as PgBouncer's alias: the workers reach it through PgBouncer alone.
    url = database_url(configured_for(pooler))
    assert "pooler=pgbouncer" in url and "options=" not in url
    for _ in range(2):
        cluster.worker(DATABASE_URL=url)

    runs = [
        engine.submit_run(workflow="migrate-records", input={"count": 40, "batch_size": 5}),
        *(engine.submit_run(workflow="pure-chain", input={}) for _ in range(4)),
        engine.submit_run(workflow="merge-change", input={"change_id": 3}),
    ]

    for run in runs:
        assert wait_settled(run, cluster).status == RunStatus.SUCCEEDED, cluster.logs()
    assert prepared_on_the_server(pooler) == []


DOCKER = Path(__file__).resolve().parents[2] / "docker"


def shipped_pgbouncer_ini() -> tuple[dict[str, str], dict[str, str]]:
    """docker/pgbouncer/pgbouncer.ini's [databases] and [pgbouncer] sections."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read_string((DOCKER / "pgbouncer" / "pgbouncer.ini").read_text())
    return dict(parser["databases"]), dict(parser["pgbouncer"])


# What the -c options set on a direct connection (config/settings.py).
KEEPALIVES = {"tcp_keepalives_idle": 30, "tcp_keepalives_interval": 10, "tcp_keepalives_count": 3}


def test_the_docker_pgbouncer_config_pools_by_transaction_and_sets_what_the_options_set(
    start_pgbouncer,
):
    """The stack's PgBouncer (docker/compose.pgbouncer.yaml), started with the shipped
    pgbouncer.ini but for where it listens, whom it trusts and which server it reaches:
    transaction mode, and every server connection it opens carries what the -c options
    would have set (config/settings.py), which a pooled client cannot send."""
    if connection.settings_dict.get("POOLER"):
        # Its connect_query must reach PostgreSQL itself: through the session's own pooler
        # its SETs would land on whichever server connection that pooler picked.
        pytest.skip("the test database is reached through a pooler (TEST_DATABASE_POOLER)")
    databases, shipped = shipped_pgbouncer_ini()
    compose = yaml.safe_load((DOCKER / "compose.pgbouncer.yaml").read_text())
    base = yaml.safe_load((DOCKER / "compose.yaml").read_text())
    # The app names the pooler, its port and a database it serves, with ?pooler=.
    url = compose["x-pooled"]["DATABASE_URL"]
    parsed = urlsplit(url)
    assert parsed.hostname == "pgbouncer" and parsed.port == int(shipped["listen_port"])
    assert parsed.path.lstrip("/") in databases and parse_qs(parsed.query) == {
        "pooler": ["pgbouncer"]
    }
    assert parsed.username == compose["services"]["pgbouncer"]["environment"]["DB_USER"]
    assert base["services"]["postgres"]["environment"]["POSTGRES_USER"] == parsed.username
    for name in ("web", "worker", "beat"):
        assert compose["services"][name]["environment"]["DATABASE_URL"] == url
    # Migrations go to PostgreSQL itself.
    assert "@postgres:5432/" in compose["services"]["web"]["command"]

    # The server line but for its address: connect_query and whatever else it sets.
    line = databases[parsed.path.lstrip("/")]
    kept = line[line.index("connect_query=") :]
    left = {"listen_addr", "listen_port", "unix_socket_dir", "auth_type", "auth_file"}
    pooler = start_pgbouncer(
        server_options=[kept], **{key: value for key, value in shipped.items() if key not in left}
    )
    # As the session's own settings: on a Unix socket (the embedded server) PostgreSQL
    # shows the keepalives as 0, whatever was set, so the value set is read back from
    # connect_query's own text and its source from pg_settings.
    with psycopg.connect(pooler.conninfo(), autocommit=True) as conn:
        shown = dict(
            conn.execute(
                "SELECT name, source FROM pg_settings WHERE name = ANY(%s)",
                [[*KEEPALIVES, "idle_in_transaction_session_timeout"]],
            ).fetchall()
        )
        timeout = conn.execute("SHOW idle_in_transaction_session_timeout").fetchone()[0]
    assert shown == dict.fromkeys([*KEEPALIVES, "idle_in_transaction_session_timeout"], "session")
    assert timeout == "5min"
    assert all(f"SET {name} = {value}" in kept for name, value in KEEPALIVES.items()), kept
    # The same bounds as the settings' defaults, on both sides of the pooler.
    assert settings.RUNS_IDLE_IN_TRANSACTION_SECONDS == 300
    assert shipped["pool_mode"] == "transaction"
    assert int(shipped["idle_transaction_timeout"]) == 300
    # And the engine runs behind it as the stack's processes would.
    run = Background(lambda: drive("pure-chain", {}), database=configured_for(pooler)).join(
        timeout=60
    )
    assert run.status == RunStatus.SUCCEEDED
