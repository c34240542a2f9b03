"""`manage.py verify_export FILE`: read a run export back and check it
(runs/record/export_check.py; docs/operating.md, "Commands"). One line per problem on stderr,
exit status 1; the verdict on stdout."""

from __future__ import annotations

from pathlib import Path
from typing import NoReturn

from django.core.management.base import BaseCommand, CommandParser

from runs.record import export_check


class Command(BaseCommand):
    help = (
        "Check a run export (export_run, GET /api/runs/{id}/export/): format and version, "
        "sections, internal consistency, and, if the run is in this database, that it "
        "matches. Exit status 1 with one line per problem."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", metavar="FILE")

    def handle(self, *args: object, **options: object) -> None:
        path = Path(str(options["file"]))
        try:
            doc = export_check.read(path)
        except export_check.ExportUnreadable as exc:
            self._fail([str(exc)])
        problems = export_check.problems_of(doc)
        if problems:
            self._fail([f"{path}: {p}" for p in problems])
        differences = export_check.differences_from_database(doc)
        if differences:
            self._fail([f"{path}: differs from the database: {d}" for d in differences])
        run, counts = doc["run"], doc["counts"]
        where = (
            "run not in this database; checked the document alone"
            if differences is None
            else "matches the database"
        )
        self.stdout.write(
            f"{path}: OK, run {run['id']} ({run.get('workflow')} v{run.get('version')}, "
            f"{run.get('status')}): {counts['steps']} steps, {counts['attempts']} attempts, "
            f"{counts['claims']} claims, {counts['events']} events"
            + (f" (+{counts['events_removed']} summarized)" if counts["events_removed"] else "")
            + f"; {where}"
        )

    def _fail(self, lines: list[str]) -> NoReturn:
        for line in lines:
            self.stderr.write(f"verify_export: {line}")
        raise SystemExit(1)
