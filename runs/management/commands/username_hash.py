from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from runs.web.accounts import username_hash


class Command(BaseCommand):
    help = (
        "Print the hash under which failed logins for each USERNAME are logged "
        "(username_hash in the log lines; it depends on SECRET_KEY)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username", nargs="+")

    def handle(self, *args: Any, **options: Any) -> None:
        for name in options["username"]:
            self.stdout.write(f"{username_hash(name)}  {name}")
