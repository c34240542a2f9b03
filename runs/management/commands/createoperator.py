from django.contrib.auth.models import Group, User
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rest_framework.authtoken.models import Token

OPERATORS = "operators"


class Command(BaseCommand):
    help = (
        "Create (or update) an operator: a staff user in the operators group. "
        "Prints an API token with --token."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        parser.add_argument("--password", default=None, help="set this password")
        parser.add_argument("--token", action="store_true", help="print the user's API token")

    def handle(self, *args: object, **options: object) -> None:
        name = str(options["name"]).strip()
        if not name:
            raise CommandError("the operator needs a name")
        user, created = User.objects.get_or_create(username=name)
        user.is_staff = True
        user.is_superuser = True  # operators manage retention policies in the admin
        password = options["password"]
        if password is not None:
            user.set_password(str(password))
        elif created:
            user.set_unusable_password()
        user.save()
        group, _ = Group.objects.get_or_create(name=OPERATORS)
        user.groups.add(group)
        self.stderr.write(f"{'created' if created else 'updated'} operator {name}")
        if options["token"]:
            token, _ = Token.objects.get_or_create(user=user)
            self.stdout.write(token.key)
