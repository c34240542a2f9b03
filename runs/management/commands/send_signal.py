import json

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from runs import engine
from runs.errors import EngineError
from runs.reads.summaries import parse_run_id


class Command(BaseCommand):
    help = (
        "Send a signal to a run that waits for it (or will), signed by an account: "
        "send_signal RUN_ID NAME --actor USERNAME [--payload JSON]. Prints one line."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("run_id")
        parser.add_argument("name")
        parser.add_argument("--payload", default="null", help="JSON (default: null)")
        # An account, not a free name: the engine checks its roles and, for an approval,
        # that it did not submit the run, as for the pages and the API (docs/api.md,
        # "Signals"). A shell user is nobody in particular: it could be the submitter.
        parser.add_argument(
            "--actor",
            required=True,
            help="the username of the account that sends it: an operator's, or a "
            "submitter's where the wait allows submitters",
        )

    def handle(self, *args: object, **options: object) -> None:
        try:
            run_id = parse_run_id(str(options["run_id"]))
            payload = json.loads(str(options["payload"]))
        except ValueError as exc:
            raise CommandError(f"bad argument: {exc}") from exc
        username = str(options["actor"]).strip()
        model = get_user_model()
        account = model.objects.filter(**{model.USERNAME_FIELD: username}, is_active=True).first()
        if account is None:
            raise CommandError(
                f"no active account named {username!r}: --actor names the account that "
                "sends the signal (python manage.py createoperator makes one)"
            )
        try:
            signal = engine.send_signal(
                run_id=run_id, name=str(options["name"]), payload=payload, actor=account
            )
        except EngineError as exc:
            raise CommandError(str(exc)) from exc
        state = "consumed" if signal.consumed_by_step_id else "kept for its wait"
        self.stdout.write(f"signal {signal.name!r} sent to run {run_id} by {username} ({state})")
