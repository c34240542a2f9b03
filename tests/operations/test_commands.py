"""manage.py: a command that cannot reach PostgreSQL says so in one line (where it tried,
how to start it), never with a traceback, and never shows the password."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HINT = "start it with `make up`, or set DATABASE_URL to a server that is running"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def manage(*args: str, database_url: str, var: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url, "DURABLE_RUNS_VAR": str(var)}
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("command", [["migrate"], ["recover"], ["show_run", "0" * 32]])
def test_manage_unreachable_database_is_one_line(tmp_path, command):
    port = free_port()
    url = f"postgres://ops:s3cret-pw@127.0.0.1:{port}/some_db"

    result = manage(*command, database_url=url, var=tmp_path)

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"cannot reach PostgreSQL at 127.0.0.1 port {port}, database some_db "
        f"(Connection refused): {HINT}\n"
    )
    assert "s3cret-pw" not in result.stderr


def test_manage_missing_database_says_to_create_it_not_to_run_make_up(tmp_path):
    """With DATABASE_URL set, `make up` migrates the database it names but does not
    create it: the message says how to, instead of sending the reader to `make up`."""
    from django.db import connection

    from runs.sql.dburl import database_url

    params = {**connection.settings_dict, "NAME": "no_such_database"}
    host, port = params.get("HOST") or "", params.get("PORT") or 5432

    result = manage("migrate", database_url=database_url(params), var=tmp_path)

    where = f"socket {host}" if host.startswith("/") else host
    createdb = f"createdb -h {host} -p {port}" if host else f"createdb -p {port}"
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"cannot reach PostgreSQL at {where} port {port}, database no_such_database "
        f'(database "no_such_database" does not exist): create it ({createdb} '
        "no_such_database), or set DATABASE_URL to a database that exists; `make up` "
        "creates one only on its embedded server\n"
    )


def test_manage_unreachable_socket_names_its_directory(tmp_path):
    url = f"postgres://postgres@{str(tmp_path / 'nosuch').replace('/', '%2F')}:5499/durable_runs"

    result = manage("recover", database_url=url, var=tmp_path)

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"cannot reach PostgreSQL at socket {tmp_path / 'nosuch'} port 5499, "
        f"database durable_runs (No such file or directory): {HINT}\n"
    )


def test_manage_other_database_errors_keep_their_traceback(tmp_path):
    """Only a failure to connect is shortened; a statement that fails is a bug to read."""
    from django.db import connection

    from runs.sql.dburl import database_url

    url = database_url({**connection.settings_dict, "NAME": "postgres"})
    code = "from django.db import connection; cursor = connection.cursor(); "
    code += "cursor.execute('SET statement_timeout = 1'); cursor.execute('SELECT pg_sleep(1)')"

    result = manage("shell", "-c", code, database_url=url, var=tmp_path)

    assert result.returncode == 1
    assert "Traceback (most recent call last)" in result.stderr
    assert result.stderr.strip().splitlines()[-1] == (
        "django.db.utils.OperationalError: canceling statement due to statement timeout"
    )
