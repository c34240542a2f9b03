"""`apply_retention [--dry-run] [--policy NAME]`: apply the retention policies now (beat
does it every RUNS_RETENTION_INTERVAL seconds); one line per policy with its counts."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.engine import retention
from runs.errors import UnknownPolicy


class Command(BaseCommand):
    help = (
        "Apply the enabled retention policies (or the one named) to finished runs: compact "
        "payloads and map registries, remove old events (keeping a summary), and at the end "
        "of the dedup window claims and submission keys. --dry-run only counts."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--dry-run", action="store_true", help="count, change nothing")
        parser.add_argument("--policy", metavar="NAME", help="only this policy")

    def handle(self, *args: object, **options: Any) -> None:
        try:
            results = retention.apply(policy=options["policy"], dry_run=options["dry_run"])
        except UnknownPolicy as exc:
            raise CommandError(str(exc)) from exc
        if not results:
            self.stdout.write("no enabled retention policy")
        for result in results:
            self.stdout.write(result.line())
