from typing import Any

from django.core.management.base import CommandError

from runs import engine
from runs.management.workflow_command import WorkflowCommand


class Command(WorkflowCommand):
    help = "Submit a run of a registered workflow; prints the new run's id as the last line."

    def handle(self, *args: Any, **options: Any) -> None:
        workflow, version, data = self.workflow_arguments(options)
        try:
            run = engine.submit_run(workflow=workflow, version=version, input=data)
        except engine.EngineError as exc:
            raise CommandError(str(exc)) from exc
        self.stderr.write(f"submitted {run.workflow} v{run.version}")
        self.stdout.write(str(run.id))
