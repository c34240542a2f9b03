from typing import Any

from django.core.management.base import CommandError, CommandParser

from runs import engine
from runs.management.workflow_command import WorkflowCommand


class Command(WorkflowCommand):
    help = (
        "Submit a run of a registered workflow; prints the run's id as the last line. With "
        "--key, submitting the same request again prints the same run (a different request "
        "under the same key is refused)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--key", default=None, help="idempotency key: at most one run per key")

    def handle(self, *args: Any, **options: Any) -> None:
        workflow, version, data = self.workflow_arguments(options)
        try:
            sub = engine.submit(
                workflow=workflow,
                version=version,
                input=data,
                key=options["key"],
                by=engine.Principal.cli(),
            )
        except engine.EngineError as exc:
            raise CommandError(str(exc)) from exc
        run = sub.run
        if sub.created:
            self.stderr.write(f"submitted {run.workflow} v{run.version}")
        else:
            self.stderr.write(
                f"key {options['key']!r} already submitted this request: run {run.id} "
                f"({run.status}); nothing new was submitted"
            )
        self.stdout.write(str(run.id))
