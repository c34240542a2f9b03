"""`createoperator NAME [--viewer | --submitter] [--token]`: create or update an account
with a role (runs/roles.py): an operator by default, a read-only viewer with --viewer, a
service account that submits runs through the API with --submitter.

The password comes from OPERATOR_PASSWORD or from a prompt (asked twice), never from the
command line, where `ps` shows it to every user of the machine. It must pass
AUTH_PASSWORD_VALIDATORS (at least 12 characters); a refused password changes nothing.
With neither a variable nor a terminal, an existing account keeps its password and a new
one gets none (it can still use an API token).
"""

from __future__ import annotations

import getpass
import os
import sys
from typing import Any, TextIO

from django.contrib.auth import password_validation
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from rest_framework.authtoken.models import Token

from runs.roles import OPERATORS, ROLES, SUBMITTERS, VIEWERS, grant_operator_permissions

PASSWORD_VARIABLE = "OPERATOR_PASSWORD"


class Command(BaseCommand):
    help = (
        "Create (or update) an operator (a staff user in the operators group), with "
        "--viewer a read-only viewer, or with --submitter a service account that submits "
        "runs through the API. The password comes from "
        f"{PASSWORD_VARIABLE} or a prompt. Prints an API token with --token."
    )
    # Tests hand in a stand-in for the terminal, as with Django's createsuperuser.
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        role = parser.add_mutually_exclusive_group()
        role.add_argument(
            "--viewer", action="store_true", help="a read-only viewer instead of an operator"
        )
        role.add_argument(
            "--submitter",
            action="store_true",
            help="a service account (not staff) that submits runs and reads runs via the API",
        )
        parser.add_argument("--token", action="store_true", help="print the user's API token")

    def handle(self, *args: object, **options: Any) -> None:
        name = str(options["name"]).strip()
        if not name:
            raise CommandError("the operator needs a name")
        stdin: TextIO = options.get("stdin") or sys.stdin

        user = User.objects.filter(username=name).first()
        created = user is None
        if user is None:
            user = User(username=name)
        password = self.read_password(name, stdin)
        if password is not None:
            check_password(password, user)  # before anything is written

        with transaction.atomic():
            if password is not None:
                user.set_password(password)
            elif created:
                user.set_unusable_password()
            role = (
                VIEWERS if options["viewer"] else SUBMITTERS if options["submitter"] else OPERATORS
            )
            grant_role(user, role)

        what = role.removesuffix("s")
        if created:
            self.stderr.write(f"created {what} {name}")
        else:
            unchanged = " (password unchanged)" if password is None else ""
            self.stderr.write(f"updated {what} {name}{unchanged}")
        if role == SUBMITTERS and not user.has_usable_password():
            self.stderr.write(f"{name} has no password: a service account uses its API token")
        elif not user.has_usable_password():
            self.stderr.write(
                f"{name} has no password: run `python manage.py createoperator {name}` "
                f"in a terminal to be asked for one, or set {PASSWORD_VARIABLE}"
            )
        if options["token"]:
            token, _ = Token.objects.get_or_create(user=user)
            self.stdout.write(token.key)

    def read_password(self, name: str, stdin: TextIO) -> str | None:
        """The new password, or None when there is nobody to ask."""
        if PASSWORD_VARIABLE in os.environ:
            return os.environ[PASSWORD_VARIABLE]
        if not stdin.isatty():
            return None
        password = getpass.getpass(f"Password for {name}: ")
        if getpass.getpass(f"Password for {name} (again): ") != password:
            raise CommandError("the two passwords differ; nothing changed")
        return password


def check_password(password: str, user: User) -> None:
    """AUTH_PASSWORD_VALIDATORS' verdict, one line per problem."""
    try:
        password_validation.validate_password(password, user)
    except ValidationError as exc:
        raise CommandError("\n".join(f"password refused: {m}" for m in exc.messages)) from exc


def grant_role(user: User, role: str) -> None:
    """Give the user exactly one role and save it. Operators are staff, not superusers:
    the admin lets them manage retention policies through their group's permissions
    (migration 0013) and nothing else; viewers and submitters are neither."""
    operator = role == OPERATORS
    user.is_staff = operator
    if not operator:
        user.is_superuser = False
    user.save()
    groups = [Group.objects.get_or_create(name=name)[0] for name in ROLES]
    user.groups.remove(*[g for g in groups if g.name != role])
    group = next(g for g in groups if g.name == role)
    user.groups.add(group)
    if operator:
        grant_operator_permissions(group)
