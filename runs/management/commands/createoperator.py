"""`createoperator NAME [--operator | --viewer | --submitter]
[--token | --rotate-token | --revoke-tokens]`: create or update an account with a role
(runs/roles.py): an operator by default, a read-only viewer with --viewer, a service
account that submits runs through the API with --submitter; and its API tokens.

The password comes from OPERATOR_PASSWORD or from a prompt (asked twice), never from the
command line, where `ps` shows it to every user of the machine. It must pass
AUTH_PASSWORD_VALIDATORS (at least 12 characters); a refused password changes nothing.
With neither a variable nor a terminal, an existing account keeps its password and a new
one gets none (it can still use an API token).

API tokens (api/authentication.py) are stored hashed, so a token is printed once, when it
is made, on stdout alone (everything else goes to stderr): --token makes a new one (each
client its own; the others keep working), --rotate-token revokes the account's tokens and
makes a new one, --revoke-tokens revokes them all. On an existing account a token option
changes its tokens only: never its password (no prompt, OPERATOR_PASSWORD ignored: one
left exported in the shell must not reset the password of whoever gets a token), and its
role only when a role option is given.
"""

from __future__ import annotations

import getpass
import os
import sys
from datetime import UTC
from typing import Any, TextIO

from django.contrib.auth import password_validation
from django.contrib.auth.models import Group, User
from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction
from knox.models import get_token_model

from runs.roles import (
    OPERATORS,
    ROLES,
    SUBMITTERS,
    VIEWERS,
    grant_operator_permissions,
    role_of,
)

PASSWORD_VARIABLE = "OPERATOR_PASSWORD"
ROLE_OPTIONS = {"operator": OPERATORS, "viewer": VIEWERS, "submitter": SUBMITTERS}
TOKEN_OPTIONS = ("token", "rotate_token", "revoke_tokens")


class Command(BaseCommand):
    help = (
        "Create (or update) an operator (a staff user in the operators group), with "
        "--viewer a read-only viewer, or with --submitter a service account that submits "
        "runs through the API. The password comes from "
        f"{PASSWORD_VARIABLE} or a prompt. --token prints a new API token, --rotate-token "
        "revokes the account's tokens and prints a new one, --revoke-tokens revokes them."
    )
    # Tests hand in a stand-in for the terminal, as with Django's createsuperuser.
    stealth_options = ("stdin",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name")
        role = parser.add_mutually_exclusive_group()
        role.add_argument(
            "--operator",
            action="store_true",
            help="an operator (the default; with a token option, makes an existing account one)",
        )
        role.add_argument(
            "--viewer", action="store_true", help="a read-only viewer instead of an operator"
        )
        role.add_argument(
            "--submitter",
            action="store_true",
            help="a service account (not staff) that submits runs and reads runs via the API",
        )
        tokens = parser.add_mutually_exclusive_group()
        tokens.add_argument(
            "--token",
            action="store_true",
            help="make a new API token and print it (once: only its hash is kept)",
        )
        tokens.add_argument(
            "--rotate-token",
            action="store_true",
            help="revoke the account's API tokens, then make a new one and print it",
        )
        tokens.add_argument(
            "--revoke-tokens",
            action="store_true",
            help="revoke every API token of the account and say how many",
        )

    def handle(self, *args: object, **options: Any) -> None:
        name = str(options["name"]).strip()
        if not name:
            raise CommandError("the operator needs a name")
        stdin: TextIO = options.get("stdin") or sys.stdin
        asked_role = next((r for option, r in ROLE_OPTIONS.items() if options[option]), None)
        token_option = next((o for o in TOKEN_OPTIONS if options[o]), None)

        user = User.objects.filter(username=name).first()
        if user is None and token_option in ("rotate_token", "revoke_tokens"):
            flag = "--" + str(token_option).replace("_", "-")
            # Most likely a mistyped name: rotating a stranger's tokens creates nobody.
            raise CommandError(f"no account named {name}: {flag} needs an existing one")
        if user is not None and token_option is not None:
            self.update_tokens_only(user, asked_role, token_option)
            return

        created = user is None
        if user is None:
            user = User(username=name)
        password = self.read_password(name, stdin)
        if password is not None:
            check_password(password, user)  # before anything is written

        role = asked_role or OPERATORS
        with transaction.atomic():
            if password is not None:
                user.set_password(password)
            elif created:
                user.set_unusable_password()
            grant_role(user, role)
            token = make_token(user) if token_option == "token" else None

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
        if token is not None:
            self.print_token(user, *token)

    def update_tokens_only(self, user: User, role: str | None, token_option: str) -> None:
        """A token option on an existing account: its tokens, and its role if asked."""
        name = user.username
        with transaction.atomic():
            # Two rotations at once end with one token, not one each.
            User.objects.select_for_update().get(pk=user.pk)
            if role is not None:
                grant_role(user, role)
            revoked = revoke_tokens(user) if token_option != "token" else None
            token = make_token(user) if token_option != "revoke_tokens" else None

        if role is not None:
            self.stderr.write(f"updated {role.removesuffix('s')} {name} (password unchanged)")
        else:
            self.stderr.write(f"{describe(user)}: password and role unchanged")
        if PASSWORD_VARIABLE in os.environ:
            self.stderr.write(
                f"{PASSWORD_VARIABLE} ignored: token options never change an existing password"
            )
        if revoked is not None:
            self.stderr.write(f"revoked {revoked} API token{'' if revoked == 1 else 's'} of {name}")
        if token is not None:
            self.print_token(user, *token)

    def print_token(self, user: User, key: str, expiry: Any) -> None:
        self.stdout.write(key)
        until = (
            f"valid until {expiry.astimezone(UTC):%Y-%m-%d %H:%M} UTC"
            if expiry is not None
            else "never expires (API_TOKEN_TTL_DAYS=0)"
        )
        self.stderr.write(
            f"new API token for {user.username}, {until}: shown once, only its hash is kept"
        )

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


def make_token(user: User) -> tuple[str, Any]:
    """A new API token of the user (expiring after knox's TOKEN_TTL): its key, which is
    stored nowhere, and its expiry."""
    row, key = get_token_model().objects.create(user=user)
    return key, row.expiry


def revoke_tokens(user: User) -> int:
    """Delete every API token of the user, expired ones included; how many there were."""
    model = get_token_model()
    _, deleted = model.objects.filter(user=user).delete()
    return int(deleted.get(model._meta.label, 0))


def describe(user: User) -> str:
    role = role_of(user)
    return f"{role.removesuffix('s')} {user.username}" if role else f"{user.username} (no role)"


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
