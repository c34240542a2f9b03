import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from config.health import run_checks


class Command(BaseCommand):
    help = (
        "Exit 0 if PostgreSQL is reachable and migrated and the broker is reachable "
        "(what /readyz checks), else 1 with one line per failed check: a container "
        "health check for workers and beat. --worker NAME also pings that Celery worker."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--worker", default=None, help="a worker's node name (celery@HOST) to ping too"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        ready, checks = run_checks()
        if options["worker"]:
            checks["worker"] = _ping(options["worker"])
            ready = ready and checks["worker"]["ok"]
        for name, result in checks.items():
            if not result["ok"]:
                self.stderr.write(f"{name}: {result['error']}")
        if not ready:
            sys.exit(1)
        self.stdout.write("ok: " + ", ".join(checks))


def _ping(node: str) -> dict[str, Any]:
    from django.conf import settings

    from config.celery import app

    try:
        replies = app.control.ping(destination=[node], timeout=settings.RUNS_HEALTH_TIMEOUT_SECONDS)
    except Exception as exc:
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    if any(node in reply for reply in replies):
        return {"ok": True}
    return {"ok": False, "error": f"worker {node} did not answer a ping"}
