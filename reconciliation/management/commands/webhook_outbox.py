from typing import cast

from django.core.management.base import BaseCommand, CommandError, CommandParser

from reconciliation import webhooks
from reconciliation.models import WebhookDelivery


class Command(BaseCommand):
    help = (
        "The webhook's outbox (docs/operating.md#webhook): one line per delivery not yet "
        "delivered (or of --status); --resend ID... sends failed ones again."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--status",
            choices=[s.value for s in WebhookDelivery.Status],
            help="only deliveries in this status (default: pending and failed)",
        )
        parser.add_argument(
            "--resend",
            nargs="+",
            type=int,
            metavar="ID",
            help="make these failed deliveries pending again, due now, tries from zero",
        )

    def handle(self, *args: object, **options: object) -> None:
        ids = cast(list[int] | None, options["resend"])
        if ids:
            try:
                changed = webhooks.resend(ids)
            except webhooks.NotFailed as exc:
                raise CommandError(str(exc)) from exc
            self.stdout.write(f"{len(changed)} webhook deliveries sent again: {changed}")
            return
        rows = WebhookDelivery.objects.order_by("id")
        status = options["status"]
        if status:
            rows = rows.filter(status=status)
        else:
            rows = rows.exclude(status=WebhookDelivery.Status.DELIVERED)
        for row in rows:
            when = row.delivered_at if row.status == "delivered" else row.next_attempt_at
            error = f" last error: {row.last_error}" if row.last_error else ""
            about = f"claim {row.claim_id}" if row.claim_id is not None else f"pause {row.pause_id}"
            self.stdout.write(
                f"{row.id} {row.event} {about} {row.status} "
                f"tries {row.tries} {'at' if row.status == 'delivered' else 'next'} "
                f"{when:%Y-%m-%d %H:%M:%S%z}{error}"
            )
