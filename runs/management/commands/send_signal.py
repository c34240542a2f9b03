import getpass
import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs import engine
from runs.queries import parse_run_id


class Command(BaseCommand):
    help = (
        "Send a signal to a run that waits for it (or will): "
        "send_signal RUN_ID NAME [--payload JSON] [--actor NAME]. Prints one line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id")
        parser.add_argument("name")
        parser.add_argument("--payload", default="null", help="JSON (default: null)")
        parser.add_argument(
            "--actor", default="", help="who sends it (default: the shell user, as cli:NAME)"
        )

    def handle(self, *args: object, **options: object) -> None:
        try:
            run_id = parse_run_id(str(options["run_id"]))
            payload = json.loads(str(options["payload"]))
        except ValueError as exc:
            raise CommandError(f"bad argument: {exc}") from exc
        actor = str(options["actor"]) or f"cli:{getpass.getuser()}"
        try:
            signal = engine.send_signal(
                run_id=run_id, name=str(options["name"]), payload=payload, actor=actor
            )
        except engine.EngineError as exc:
            raise CommandError(str(exc)) from exc
        state = "consumed" if signal.consumed_by_step_id else "kept for its wait"
        self.stdout.write(f"signal {signal.name!r} sent to run {run_id} by {actor} ({state})")
