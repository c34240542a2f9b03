"""runs/sql/schema.sql is what the migrations make: a database migrated from zero has
exactly the hand-made objects (functions, triggers) the file defines, each as the file
defines it, and the newest LoadSchema names the file's digest, so that an edit without
its migration fails here instead of never reaching a database migrated before it."""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from django.conf import settings
from django.db.migrations.loader import MigrationLoader
from psycopg import sql

from runs.roles import OPERATOR_ADMIN_PERMISSIONS
from runs.sql.dburl import database_url
from runs.sql.schema import LoadSchema, schema_digest, schema_sql

ROOT = Path(__file__).resolve().parents[2]

# Routines that neither PostgreSQL nor an extension brings: functions, procedures,
# aggregates made by hand.
OWN_ROUTINES = """
  FROM pg_proc p
 WHERE p.pronamespace::regnamespace::text NOT IN ('pg_catalog', 'information_schema')
   AND NOT EXISTS (SELECT 1 FROM pg_depend d
                    WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid
                      AND d.deptype = 'e')
"""
# Every object that Django's migration operations do not make: those routines, triggers
# other than PostgreSQL's own (those of foreign keys), event triggers. Each keyed by what
# it is, with its definition as PostgreSQL prints it back.
HAND_MADE = f"""
SELECT 'function ' || p.oid::regprocedure::text,
       CASE WHEN p.prokind IN ('f', 'p') THEN pg_get_functiondef(p.oid)
            ELSE 'prokind ' || p.prokind::text END
{OWN_ROUTINES}
UNION ALL
SELECT 'trigger ' || t.tgname || ' on ' || t.tgrelid::regclass::text, pg_get_triggerdef(t.oid)
  FROM pg_trigger t
 WHERE NOT t.tgisinternal
UNION ALL
SELECT 'event trigger ' || e.evtname, e.evtevent || ' ' || e.evtfoid::regprocedure::text
  FROM pg_event_trigger e
"""


def url_of(name: str, **server: str) -> str:
    """DATABASE_URL of database `name` on the suite's server, for a child process;
    `server` settings (-c) are added unless a pooler is in between (it would refuse
    them)."""
    database = settings.DATABASES["default"]
    options = dict(database.get("OPTIONS") or {})
    if server and not database.get("POOLER"):
        flags = " ".join(f"-c {key}={value}" for key, value in server.items())
        options["options"] = f"{options.get('options', '')} {flags}".strip()
    return database_url({**database, "NAME": name, "OPTIONS": options})


def connect(name: str, *, autocommit: bool = False) -> psycopg.Connection:
    """A connection of this process to database `name` on the suite's server."""
    database = settings.DATABASES["default"]
    params = {
        "host": database.get("HOST") or None,
        "port": database.get("PORT") or None,
        "user": database.get("USER") or None,
        "password": database.get("PASSWORD") or None,
        **(database.get("OPTIONS") or {}),
    }
    params = {key: value for key, value in params.items() if value is not None}
    return psycopg.connect(dbname=name, autocommit=autocommit, **params)


@pytest.fixture
def empty_database() -> Iterator[str]:
    """A database of its own, from template0 (template1 may hold a server's additions).
    Not the session's test database: --reuse-db would keep it from a run before."""
    name = f"test_schema_file_{uuid.uuid4().hex[:8]}"
    with connect("postgres", autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with connect("postgres", autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def migrate_from_zero(name: str) -> None:
    """`manage.py migrate` into `name`, as a deployment runs it. Its commits need not
    survive a crash of the server: synchronous_commit off halves the time."""
    env = {**os.environ, "DATABASE_URL": url_of(name, synchronous_commit="off")}
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def hand_made(conn: psycopg.Connection) -> dict[str, str]:
    return {key: definition for key, definition in conn.execute(HAND_MADE).fetchall()}


def drop_hand_made(conn: psycopg.Connection) -> None:
    """Leave the tables as Django's operations made them: with no hand-made object."""
    for (routine,) in conn.execute(f"SELECT p.oid::regprocedure::text {OWN_ROUTINES}").fetchall():
        # CASCADE: the triggers that call it go with it.
        conn.execute(sql.SQL("DROP ROUTINE {} CASCADE").format(sql.SQL(routine)))
    for trigger, table in conn.execute(
        "SELECT tgname, tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal"
    ).fetchall():
        conn.execute(
            sql.SQL("DROP TRIGGER {} ON {}").format(sql.Identifier(trigger), sql.SQL(table))
        )
    for (event_trigger,) in conn.execute("SELECT evtname FROM pg_event_trigger").fetchall():
        conn.execute(sql.SQL("DROP EVENT TRIGGER {}").format(sql.Identifier(event_trigger)))


def drift(migrated: dict[str, str], from_file: dict[str, str]) -> str:
    """What differs, object by object, in words and line diffs."""
    lines = [
        f"{key}: made by the migrations, not in runs/sql/schema.sql"
        for key in sorted(migrated.keys() - from_file.keys())
    ]
    lines += [
        f"{key}: in runs/sql/schema.sql, not made by the migrations"
        for key in sorted(from_file.keys() - migrated.keys())
    ]
    for key in sorted(migrated.keys() & from_file.keys()):
        if migrated[key] != from_file[key]:
            diff = difflib.unified_diff(
                migrated[key].splitlines(),
                from_file[key].splitlines(),
                "migrations",
                "runs/sql/schema.sql",
                lineterm="",
            )
            lines.append(f"{key} differs:\n" + "\n".join(diff))
    return "\n".join(lines)


@pytest.mark.servers  # the migrations and the file, on the session's PostgreSQL
def test_schema_file_is_what_migrations_from_zero_make(empty_database):
    migrate_from_zero(empty_database)

    with connect(empty_database) as conn:
        migrated = hand_made(conn)
        granted = {
            codename
            for (codename,) in conn.execute(
                "SELECT p.codename FROM auth_group g"
                " JOIN auth_group_permissions gp ON gp.group_id = g.id"
                " JOIN auth_permission p ON p.id = gp.permission_id"
                " WHERE g.name = 'operators'"
            )
        }
        # The same tables with no hand-made object, then the file alone; then the file
        # again on top, as a later migration reloads it: that must change nothing.
        drop_hand_made(conn)
        assert hand_made(conn) == {}
        conn.execute(schema_sql())
        from_file = hand_made(conn)
        conn.execute(schema_sql())
        reloaded = hand_made(conn)
        conn.rollback()

    assert from_file, "runs/sql/schema.sql makes nothing"
    problems = drift(migrated, from_file)
    assert not problems, (
        "a database migrated from zero does not have the objects of runs/sql/schema.sql "
        f"(is the newest LoadSchema {schema_digest()!r}?):\n{problems}"
    )
    assert reloaded == from_file
    # The migrations give the operators group what runs/roles.py says operators may do
    # in the admin, no more and no less (runs/migrations/_grants.py).
    assert granted == {
        f"{action}_{model}"
        for model, actions in OPERATOR_ADMIN_PERMISSIONS.items()
        for action in actions
    }


def newest_load() -> tuple[str, LoadSchema]:
    """The migration of the runs app, last in order, that loads the file, and its op."""
    graph = MigrationLoader(None, ignore_no_migrations=True).graph
    (leaf,) = [node for node in graph.leaf_nodes() if node[0] == "runs"]
    loads = [
        (name, operation)
        for app, name in graph.forwards_plan(leaf)
        if app == "runs"
        for operation in graph.nodes[(app, name)].operations
        if isinstance(operation, LoadSchema)
    ]
    assert loads, "no migration of the runs app loads runs/sql/schema.sql"
    return loads[-1]


def test_schema_file_newest_load_names_the_file_digest():
    name, load = newest_load()
    digest = schema_digest()

    assert load.digest == digest, (
        f"runs/sql/schema.sql changed since migration {name} loaded it ({load.digest}), so "
        "no database migrated before would get the change: add a migration "
        "(manage.py makemigrations runs --empty --name reload_schema) whose operations are "
        f"[LoadSchema({digest!r})] (from runs.sql.schema import LoadSchema)"
    )
    assert load.sql == schema_sql()


def test_load_schema_of_another_digest_runs_nothing():
    """A load written for an older file: a later migration loads the file as it is."""
    load = LoadSchema("0" * 16)

    assert (load.superseded, load.sql, load.reverse_sql) == (True, "", "")
    assert load.describe().startswith("Skip runs/sql/schema.sql 0000000000000000")
    assert load.deconstruct() == ("LoadSchema", ["0" * 16], {})
