"""scripts/stack.py, the supervisor behind `make up` / `make bench`: its development
SECRET_KEY, and (marked `workers`) a real stack whose worker is killed.

Every stack here runs with DURABLE_RUNS_VAR pointing at a temporary directory, so a
developer's var/ (operator login, secret key, services.env) is never touched."""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import psutil
import pytest
from django.conf import settings
from django.contrib.auth.models import User

from runs.tools.processes import WORKER_READY, delete_queues
from tests.support import places, waiting

ROOT = Path(__file__).resolve().parents[2]
STACK = ROOT / "scripts" / "stack.py"


def load_stack() -> ModuleType:
    """scripts/ is not a package; stack.py imports nothing from Django, so load it as is."""
    spec = importlib.util.spec_from_file_location("stack", STACK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["stack"] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def stack_env(var: Path, **extra: str) -> dict[str, str]:
    """This session's environment (DATABASE_URL / CELERY_BROKER_URL included, so no
    embedded server starts) minus its SECRET_KEY and workflow modules (a shell's `make
    up` has neither), with the var dir moved to `var`."""
    unset = ("SECRET_KEY", "DEBUG", "RUNS_WORKFLOW_MODULES")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(DURABLE_RUNS_VAR=str(var), **extra)
    return env


def test_stack_secret_key_is_generated_private_and_reused(tmp_path):
    stack = load_stack()

    key = stack._secret_key(tmp_path)

    path = tmp_path / "secret_key"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text() == key + "\n"
    assert len(key) >= 50
    assert stack._secret_key(tmp_path) == key


def test_stack_run_gives_its_command_a_secret_key(tmp_path):
    """`make bench` is `stack.py run ...`: Django must start there with no SECRET_KEY set."""
    show_key = "import django; django.setup(); from django.conf import settings; "
    show_key += "print(settings.SECRET_KEY)"

    result = subprocess.run(
        [sys.executable, str(STACK), "run", sys.executable, "-c", show_key],
        cwd=ROOT,
        env=stack_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout == (tmp_path / "bench" / "secret_key").read_text()


def test_stack_env_exports_the_development_secret_key(tmp_path):
    result = subprocess.run(
        [sys.executable, str(STACK), "env"],
        cwd=ROOT,
        env=stack_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 0, result.stderr
    key = (tmp_path / "secret_key").read_text().strip()
    assert f"export SECRET_KEY={key}" in result.stdout.splitlines()
    # The examples, which a deployment does not register unless told (config/settings.py).
    assert "export RUNS_WORKFLOW_MODULES=examples.workflows" in result.stdout.splitlines()


def test_stack_backoff_doubles_to_a_cap_and_resets_after_a_good_run():
    backoff = load_stack().Backoff()

    delays = [backoff.next_delay(uptime=2.0) for _ in range(7)]
    after_a_good_run = [backoff.next_delay(uptime=600.0), backoff.next_delay(uptime=2.0)]

    assert delays == [1, 2, 4, 8, 16, 30, 30]
    assert after_a_good_run == [1, 2]


# --- a real `stack.py up` ---------------------------------------------------------------------


def alive(proc: psutil.Process) -> bool:
    """Running and not a zombie (this container's init may never reap one)."""
    try:
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Stack:
    proc: subprocess.Popen[bytes]
    log: Path
    var: Path
    port: int
    queue: str

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def lines(self) -> list[str]:
        return self.output().splitlines()

    def wait(self, predicate, what: str, timeout: float = 120.0):
        def checked():
            if self.proc.poll() is not None:
                raise AssertionError(f"stack exited ({self.proc.returncode}):\n{self.output()}")
            return predicate()

        return waiting.wait_for(
            checked, timeout=timeout, what=what, on_timeout=lambda: self.output()[-6000:]
        )

    def status(self) -> int | None:
        """The dashboard's HTTP status, None while nothing answers."""
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
        try:
            conn.request("GET", "/")
            return conn.getresponse().status
        except OSError:
            return None
        finally:
            conn.close()

    def child(self, marker: str) -> psutil.Process | None:
        """The stack's direct child whose command line contains `marker`."""
        for proc in psutil.Process(self.proc.pid).children():
            try:
                if marker in proc.cmdline() and alive(proc):
                    return proc
            except psutil.Error:
                continue
        return None

    def processes(self) -> list[psutil.Process]:
        """Every live process started for this stack (they all carry its queue name),
        the stack itself included."""
        found = []
        for proc in psutil.process_iter():
            try:
                if proc.environ().get("RUNS_QUEUE") == self.queue and alive(proc):
                    found.append(proc)
            except psutil.Error:
                continue
        return found

    def wait_exit(self, timeout: float = 90.0) -> int:
        return self.proc.wait(timeout)


@pytest.fixture
def stack(transactional_db, tmp_path) -> Iterator[Stack]:
    """`stack.py up` on this session's test database and broker, its own queue and port,
    and a var dir under tmp_path. Whatever is left of it is killed afterwards."""
    queue = f"durable-runs-stack-{uuid.uuid4().hex[:8]}"
    var, port = tmp_path / "var", free_port()
    env = stack_env(
        var,
        DATABASE_URL=places.database_url_for_tests(),
        CELERY_BROKER_URL=settings.CELERY_BROKER_URL,
        RUNS_QUEUE=queue,
        PYTHONUNBUFFERED="1",
    )
    log = tmp_path / "stack.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, str(STACK), "up", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = Stack(proc, log, var, port, queue)
    try:
        yield running
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for leftover in running.processes():
            leftover.kill()
        delete_queues(queue)


def wait_ready(stack: Stack) -> None:
    """Dashboard answering (the login redirect) and the worker ready."""
    stack.wait(lambda: stack.status() in (200, 302), "the dashboard to answer")
    stack.wait(lambda: stack.output().count(WORKER_READY) == 1, "the worker to be ready")


@pytest.mark.workers
def test_stack_up_restarts_a_killed_worker_and_stops_cleanly(stack):
    wait_ready(stack)
    # Zero configuration: a private development key, shared with other shells.
    key = (stack.var / "secret_key").read_text().strip()
    assert stat.S_IMODE((stack.var / "secret_key").stat().st_mode) == 0o600
    services = (stack.var / "services.env").read_text().splitlines()
    assert f"SECRET_KEY={key}" in services
    # A second shell's manage.py knows the examples `make up` registers.
    assert "RUNS_WORKFLOW_MODULES=examples.workflows" in services
    assert stat.S_IMODE((stack.var / "services.env").stat().st_mode) == 0o600
    # The operator login went through OPERATOR_PASSWORD.
    login = json.loads((stack.var / "operator.json").read_text())
    assert User.objects.get(username=login["username"]).check_password(login["password"])
    worker = stack.child("worker")
    assert worker is not None
    group = [worker, *worker.children(recursive=True)]  # the leader and its pool

    os.killpg(worker.pid, signal.SIGKILL)

    restart = "stack: worker exited with code -9 (SIGKILL); restarting it in 1s"
    stack.wait(lambda: restart in stack.lines(), "the restart line")
    new = stack.wait(
        lambda: (w := stack.child("worker")) is not None and w.pid != worker.pid and w,
        "a new worker process",
    )
    stack.wait(lambda: stack.output().count(WORKER_READY) == 2, "the new worker to be ready")
    assert [p.pid for p in group if alive(p)] == []
    assert alive(new)
    assert stack.status() == 302  # web kept answering
    assert stack.output().count("restarting it in") == 1

    stack.proc.send_signal(signal.SIGTERM)

    assert stack.wait_exit() == 0, stack.output()
    assert stack.lines()[-1] == "stopped"
    assert stack.processes() == []
    assert not (stack.var / "services.env").exists()


@pytest.mark.workers
def test_stack_up_stops_everything_when_web_dies(stack):
    wait_ready(stack)
    web = stack.child("runserver")
    assert web is not None

    os.killpg(web.pid, signal.SIGKILL)

    assert stack.wait_exit() == 1, stack.output()
    lines = stack.lines()
    assert "stack: web exited with code -9 (SIGKILL); stopping everything" in lines
    assert lines[-1] == "stack: stopped because web exited with code -9 (SIGKILL)"
    assert "restarting it in" not in stack.output()
    assert stack.processes() == []
