"""`manage.py export_run RUN_ID [--output FILE]`: the run's export document
(docs/api.md, "Run export"), on stdout or into FILE."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs.errors import RunNotFound
from runs.reads.summaries import parse_run_id
from runs.record import export


class Command(BaseCommand):
    help = (
        "Export a run as one versioned JSON document (run, steps, attempts, claims and "
        "their resolutions, signals, events or their retained summary), read in one "
        "snapshot. On stdout, or into --output FILE. `verify_export FILE` checks it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id", metavar="RUN_ID")
        parser.add_argument(
            "--output", "-o", metavar="FILE", help="write it here (default: stdout)"
        )

    def handle(self, *args: object, **options: object) -> None:
        try:
            run_id = parse_run_id(str(options["run_id"]))
            doc = export.build(run_id, exported_by="cli")
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        except RunNotFound as exc:
            raise CommandError(str(exc)) from exc
        text = json.dumps(doc, indent=1, ensure_ascii=False)
        output = options["output"]
        if output is None:
            self.stdout.write(text)
            return
        path = Path(str(output))
        try:
            # Written whole, then renamed: an interrupted export leaves no half document.
            partial = path.with_name(f".{path.name}.partial")
            partial.write_text(text + "\n", encoding="utf-8")
            partial.replace(path)
        except OSError as exc:
            raise CommandError(f"cannot write {path}: {exc.strerror}") from exc
        counts = doc["counts"]
        self.stderr.write(
            f"wrote {path}: run {run_id} ({doc['run']['status']}), {counts['steps']} steps, "
            f"{counts['attempts']} attempts, {counts['claims']} claims, {counts['events']} events"
            + (f" (+{counts['events_removed']} summarized)" if counts["events_removed"] else "")
        )
