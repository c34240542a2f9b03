from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, CommandParser

from runs import engine
from runs.errors import EngineError
from runs.management.workflow_command import WorkflowCommand
from runs.principals import Principal
from runs.roles import can_submit


class Command(WorkflowCommand):
    help = (
        "Submit a run of a registered workflow; prints the run's id as the last line. With "
        "--key, submitting the same request again prints the same run (a different request "
        "under the same key is refused). With --actor, the run is that account's "
        "(needed for a workflow that waits for an approval)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        super().add_arguments(parser)
        parser.add_argument("--key", default=None, help="idempotency key: at most one run per key")
        # An account, checked as send_signal checks its --actor: the run is recorded as
        # its (`user:<name>` via cli), so four eyes refuses that person's approval.
        # Without it the run is `cli`'s, nobody in particular, which a workflow with an
        # approval refuses (docs/api.md#principals).
        parser.add_argument(
            "--actor",
            default=None,
            help="the username of the account that submits it: a submitter's or an operator's",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        workflow, version, data = self.workflow_arguments(options)
        by = Principal.cli(self._account(options["actor"]))
        try:
            sub = engine.submit(
                workflow=workflow, version=version, input=data, key=options["key"], by=by
            )
        except EngineError as exc:
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

    @staticmethod
    def _account(actor: str | None) -> Any:
        if actor is None:
            return None
        username = actor.strip()
        model = get_user_model()
        account = model.objects.filter(**{model.USERNAME_FIELD: username}, is_active=True).first()
        if account is None:
            raise CommandError(
                f"no active account named {username!r}: --actor names the account that "
                "submits the run (python manage.py createoperator makes one)"
            )
        if not can_submit(account):
            raise CommandError(f"{username} may not submit runs (a submitter or an operator may)")
        return account
