"""Arguments shared by the commands that name a workflow and its input
(`submit_run`, `crashcheck`): WORKFLOW [--version V] --input JSON."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class WorkflowCommand(BaseCommand):
    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        # The contract's `--version V` is the workflow version, not Django's --version.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("workflow")
        parser.add_argument(
            "--version",
            dest="wf_version",
            type=int,
            default=None,
            help="workflow version (default: the latest)",
        )
        parser.add_argument("--input", default="{}", help="the input, as a JSON object")

    def workflow_arguments(self, options: dict[str, Any]) -> tuple[str, int | None, Any]:
        """(workflow name, version or None, decoded input), or a CommandError."""
        try:
            data = json.loads(str(options["input"]))
        except json.JSONDecodeError as exc:
            raise CommandError(f"--input is not valid JSON: {exc}") from exc
        return str(options["workflow"]), options["wf_version"], data
