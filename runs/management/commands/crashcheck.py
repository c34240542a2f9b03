import signal
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from django.core.management.base import CommandError, CommandParser

from runs import engine
from runs.errors import EngineError
from runs.management.workflow_command import WorkflowCommand
from runs.tools import crashcheck
from runs.tools.processes import ProcessError


@contextmanager
def _termination_interrupts() -> Iterator[None]:
    """SIGTERM / SIGHUP raise KeyboardInterrupt, like Ctrl-C, so that the check's
    worker processes (in sessions of their own) are stopped on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Command(WorkflowCommand):
    help = (
        "Check that a workflow survives crashes: run it once per (step, fault point) with a "
        "real worker killed by SIGKILL at that point, recover it with a fresh worker and "
        "beat, and count its effects. Exit status 1 on a DUPLICATE or LOST effect or a "
        "history that differs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument(
            "--nth",
            type=int,
            default=1,
            help="kill at the Nth time the worker reaches the point (default 1; for a map "
            "step the points are per item)",
        )
        parser.add_argument(
            "--lease",
            type=float,
            default=2.0,
            help="lease of the checks' attempts in seconds (default 2): how soon a dead "
            "worker is noticed. Raise it above your longest step that does not call "
            "ctx.heartbeat(), or live steps will be declared crashed",
        )
        parser.add_argument(
            "--timeout",
            type=float,
            default=60.0,
            help="seconds a run may take to settle, before and after the crash (default 60)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name, version, data = self.workflow_arguments(options)
        nth, timeout, lease = options["nth"], options["timeout"], options["lease"]
        assert isinstance(nth, int) and isinstance(timeout, float) and isinstance(lease, float)
        if nth < 1:
            raise CommandError("--nth must be at least 1")
        if lease <= 0:
            raise CommandError("--lease must be positive")
        if timeout <= 0:
            raise CommandError("--timeout must be positive")
        try:
            wf = engine.resolve_workflow(name, version)
            clean = wf.validate_input(data)
        except EngineError as exc:
            raise CommandError(str(exc)) from exc

        self.stderr.write(
            f"crashcheck {wf.name} v{wf.version}: {len(wf.steps)} step(s) x "
            f"{len(crashcheck.FAULT_POINTS)} fault points, nth={nth}, timeout {timeout:g}s"
        )
        rows: list[crashcheck.CheckRow] = []
        started = time.monotonic()
        interrupted = False
        try:
            with _termination_interrupts():
                for row in crashcheck.iter_checks(
                    wf, clean, nth=nth, timeout=timeout, lease=lease, progress=self.stderr.write
                ):
                    rows.append(row)
        except KeyboardInterrupt:
            interrupted = True
        except ProcessError as exc:  # a check could not run (crashcheck.CrashcheckError too)
            raise CommandError(str(exc)) from exc

        report = crashcheck.format_report(
            rows, wf, seconds=time.monotonic() - started, nth=nth, interrupted=interrupted
        )
        for line in report:
            self.stdout.write(line)
        if interrupted:
            raise CommandError("interrupted; every process the check started was stopped")
        if crashcheck.failed(rows):
            sys.exit(1)
