import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs import engine


class Command(BaseCommand):
    help = "Submit a run of a registered workflow; prints the new run's id as the last line."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: object) -> CommandParser:
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
        parser.add_argument("--input", default="{}", help="the run's input, as a JSON object")

    def handle(self, *args: object, **options: object) -> None:
        try:
            data = json.loads(str(options["input"]))
        except json.JSONDecodeError as exc:
            raise CommandError(f"--input is not valid JSON: {exc}") from exc
        try:
            run = engine.submit_run(
                workflow=str(options["workflow"]),
                version=options["wf_version"],  # type: ignore[arg-type]
                input=data,
            )
        except engine.EngineError as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(f"submitted {run.workflow} v{run.version}")
        self.stdout.write(str(run.id))
