"""Real Celery worker and beat child processes, for `manage.py crashcheck` and the test
suite: one place that knows how to start them, tell when they are ready, and stop them
(with their whole process group) without leaving anything behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings
from kombu.connection import Connection
from kombu.entity import Exchange, Queue

WORKER_READY = " ready."
BEAT_READY = "beat: Starting"
POLL_SECONDS = 0.1


class ProcessError(Exception):
    """A child process did not start, or died before it was ready."""


def celery_worker_args(node_name: str, pool: tuple[str, ...] = ("-P", "solo")) -> list[str]:
    """A solo-pool worker by default: a task runs in the worker's main process, so a
    fault-injected SIGKILL kills the whole worker, as an OOM kill would. `pool` replaces
    the pool's options (a prefork worker's children: -P prefork -c 2 ...). INFO, because
    the "ready." line is logged at INFO."""
    return [
        sys.executable, "-m", "celery", "-A", "config", "worker", *pool,
        "-n", node_name, "--without-gossip", "--without-mingle", "--without-heartbeat",
        "--loglevel", "INFO",
    ]  # fmt: skip


def celery_beat_args(schedule: Path) -> list[str]:
    return [
        sys.executable, "-m", "celery", "-A", "config", "beat",
        "--loglevel", "INFO", "--schedule", str(schedule),
    ]  # fmt: skip


class ChildProcess:
    """A child in its own session (so signals reach its whole group), output to a file."""

    def __init__(self, name: str, args: list[str], env: dict[str, str], log: Path) -> None:
        self.name, self.log = name, log
        self._log_file = log.open("wb")
        try:
            self.popen = subprocess.Popen(
                args,
                cwd=settings.BASE_DIR,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=self._log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        except BaseException:
            self._log_file.close()
            raise

    def output(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    def tail(self, chars: int = 3000) -> str:
        return self.output()[-chars:]

    def wait_ready(self, marker: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while marker not in self.output():
            if self.popen.poll() is not None:
                raise ProcessError(
                    f"{self.name} exited with {self.popen.returncode} before it was ready:\n"
                    f"{self.tail()}"
                )
            if time.monotonic() > deadline:
                raise ProcessError(f"{self.name} not ready after {timeout:g}s:\n{self.tail()}")
            time.sleep(POLL_SECONDS)

    def wait_exit(self, timeout: float = 60.0) -> int:
        try:
            return self.popen.wait(timeout)
        except subprocess.TimeoutExpired as exc:
            raise ProcessError(f"{self.name} did not exit:\n{self.tail()}") from exc

    def signal(self, sig: int) -> None:
        if self.popen.poll() is None:
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.signal(signal.SIGTERM)

    def finish(self, deadline: float) -> None:
        """Wait for the process until `deadline` (after terminate()), then SIGKILL."""
        try:
            self.popen.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            self.popen.wait()
        finally:
            self._log_file.close()


def delete_queues(queue: str, broker_url: str | None = None) -> None:
    """Delete the queues of RUNS_QUEUE=`queue` (it and its -recovery twin) and their
    exchange, once the processes that used them are gone: a RabbitMQ keeps durable
    queues until someone deletes them (Redis forgets an empty list by itself). A broker
    that does not answer now keeps them; nothing fails."""
    try:
        with Connection(broker_url or settings.CELERY_BROKER_URL, connect_timeout=5) as conn:
            conn.ensure_connection(max_retries=1)
            channel = conn.default_channel
            for name in (queue, f"{queue}-recovery"):
                Queue(name, channel=channel).delete()
            # Celery's default exchange is named after the default queue.
            Exchange(queue, channel=channel).delete()
    except Exception:
        pass


def stop_all(processes: list[ChildProcess], grace: float = 10.0) -> None:
    """SIGTERM every process group, wait up to `grace` seconds, SIGKILL what is left.
    A stopped (SIGSTOP) process is continued so that it can act on the SIGTERM."""
    for proc in processes:
        proc.signal(signal.SIGCONT)
        proc.terminate()
    deadline = time.monotonic() + grace
    for proc in processes:
        proc.finish(deadline)
