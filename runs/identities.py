"""Signing a person in from a single sign-on provider's verified claims: which account,
which roles (docs/operating.md#single-sign-on). No HTTP here: runs/web/sso.py verifies
the tokens and hands over a Person; this decides, in one transaction.

The rules:
- an account is the provider's (issuer, subject), linked in SignInIdentity the first
  time; the username is the provider's (OIDC_USERNAME_CLAIM) and follows it when it
  changes there;
- a username the principals cannot record (runs/principals.py: no ':') is refused, and
  so is one that an account not linked to this identity already has: a provider's user
  never takes over a local account;
- the roles (runs/roles.py) and is_staff are set at every sign-in from the provider's
  groups (OIDC_ROLE_GROUPS), added and removed, so a person removed from a group at the
  provider loses what it gave at their next sign-in; superuser is never granted (and is
  taken away); a person whose groups give no role is refused, never given a default
  (and an account they had loses its roles).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.contrib.auth.models import Group, User
from django.db import IntegrityError, transaction
from django.db.models.functions import Now

from runs.models import SignInIdentity
from runs.roles import OPERATORS, ROLES, grant_operator_permissions

log = logging.getLogger("durable_runs.auth")

# Not a role: Django's is_staff, which lets an account into /admin/ (what it may do
# there comes from its role's permissions).
STAFF = "staff"
MAPPABLE = (*ROLES, STAFF)
USERNAME_MAX = 150  # django.contrib.auth's username column


def parse_role_groups(text: str) -> dict[str, tuple[str, ...]]:
    """OIDC_ROLE_GROUPS, `role=group,role=group,...`, as {role: (groups...)}: a role may
    be named several times (several groups give it), a group under several roles (it
    gives each). Raises ValueError with one sentence saying what is wrong."""
    mapping: dict[str, list[str]] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        role, equals, group = (s.strip() for s in item.partition("="))
        if not equals or not role or not group:
            raise ValueError(f"{item!r} is not role=group")
        if role not in MAPPABLE:
            raise ValueError(f"{role!r} is not a role (one of {', '.join(MAPPABLE)})")
        mapping.setdefault(role, [])
        if group not in mapping[role]:
            mapping[role].append(group)
    return {role: tuple(groups) for role, groups in mapping.items()}


def granted(
    groups: Iterable[str], mapping: Mapping[str, Iterable[str]]
) -> tuple[frozenset[str], bool]:
    """The roles and whether staff, for a person in `groups` at the provider."""
    held = set(groups)
    given = {role for role, names in mapping.items() if held.intersection(names)}
    return frozenset(given - {STAFF}), STAFF in given


@dataclass(frozen=True)
class Person:
    """A person as a verified ID token and the provider's userinfo describe them."""

    issuer: str
    subject: str
    username: str
    groups: tuple[str, ...]


class Refused(Exception):
    """Not signed in, and why, in words for the person (templates/accounts/sso_refused.html)."""

    def __init__(self, reason: str, message: str, *, groups: tuple[str, ...] | None = None):
        super().__init__(message)
        self.reason, self.message, self.groups = reason, message, groups


@dataclass(frozen=True)
class SignedIn:
    user: User
    created: bool
    roles: frozenset[str]
    staff: bool
    added: frozenset[str]
    removed: frozenset[str]
    renamed_from: str | None


def check_username(username: str) -> None:
    if not username or username != username.strip():
        raise Refused(
            "username",
            f"The provider gave no usable username for you ({username!r} in its "
            "username claim). Ask your administrator to check the provider's settings.",
        )
    if ":" in username or len(username) > USERNAME_MAX:
        raise Refused(
            "username",
            f"The provider's username for you, {username!r}, cannot be used here: a "
            f"username may not contain ':' and has at most {USERNAME_MAX} characters. "
            "Ask your administrator.",
        )


def sign_in(person: Person, mapping: Mapping[str, Iterable[str]]) -> SignedIn:
    """The account of `person`, made or updated, with exactly the roles their groups
    give; or Refused. One transaction: the identity's row is locked, so two sign-ins of
    one person do not interleave; the unique constraints (the identity's, the username's)
    decide a race with a stranger."""
    roles, staff = granted(person.groups, mapping)
    if not roles:
        # An account this person had keeps no role either (its API tokens, if any, then
        # answer 403): the provider has taken their access away.
        with transaction.atomic():
            _take_roles_away(person)
        raise Refused(
            "no-role",
            "None of your groups at the provider gives a role here.",
            groups=person.groups,
        )
    check_username(person.username)
    for _ in range(2):  # once more only if this person's first sign-in raced itself
        try:
            with transaction.atomic():
                return _sign_in(person, roles, staff)
        except _IdentityRaced:
            continue
    raise Refused("busy", "Another sign-in of yours was under way. Try again.")


class _IdentityRaced(Exception):
    pass


def _sign_in(person: Person, roles: frozenset[str], staff: bool) -> SignedIn:
    identity = (
        SignInIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=person.issuer, subject=person.subject)
        .first()
    )
    created, renamed_from = identity is None, None
    if identity is None:
        user = _new_account(person)
    else:
        user = identity.user
        if not user.is_active:
            raise Refused(
                "inactive",
                f"The account {user.username} is deactivated here. Ask your administrator.",
            )
        if user.username != person.username:
            renamed_from = _rename(user, person.username)
        SignInIdentity.objects.filter(pk=identity.pk).update(last_sign_in_at=Now())
    user.is_staff, user.is_superuser = staff, False
    user.save(update_fields=["is_staff", "is_superuser"])
    added, removed = _set_roles(user, roles)
    return SignedIn(user, created, roles, staff, added, removed, renamed_from)


def _take_roles_away(person: Person) -> None:
    identity = (
        SignInIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=person.issuer, subject=person.subject)
        .first()
    )
    if identity is None:
        return
    user = identity.user
    user.is_staff, user.is_superuser = False, False
    user.save(update_fields=["is_staff", "is_superuser"])
    _, removed = _set_roles(user, frozenset())
    if removed:
        log.warning(
            "single sign-on: %s has no role at the provider any more; removed %s",
            user.username,
            ", ".join(sorted(removed)),
        )


def _new_account(person: Person) -> User:
    try:
        with transaction.atomic():
            user = User(username=person.username)
            user.set_unusable_password()  # signs in at the provider only
            user.save()
    except IntegrityError:
        # This person's other first sign-in, committed meanwhile, made it: take that one.
        if SignInIdentity.objects.filter(issuer=person.issuer, subject=person.subject).exists():
            raise _IdentityRaced from None
        raise _taken(person.username) from None
    try:
        with transaction.atomic():
            SignInIdentity.objects.create(issuer=person.issuer, subject=person.subject, user=user)
    except IntegrityError:
        # Linked meanwhile by this person's other sign-in under another username.
        raise _IdentityRaced from None
    return user


def _rename(user: User, username: str) -> str:
    before = user.username
    try:
        with transaction.atomic():
            User.objects.filter(pk=user.pk).update(username=username)
    except IntegrityError:
        raise _taken(username) from None
    user.username = username
    return before


def _taken(username: str) -> Refused:
    return Refused(
        "taken",
        f"An account named {username} already exists here and is not linked to your "
        "sign-in at the provider, so it is not yours to take over. Ask your administrator "
        "(they may rename or remove the other account).",
    )


def _set_roles(user: User, roles: frozenset[str]) -> tuple[frozenset[str], frozenset[str]]:
    groups = {name: Group.objects.get_or_create(name=name)[0] for name in ROLES}
    held = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    added, removed = frozenset(roles - held), frozenset(held - roles)
    if removed:
        user.groups.remove(*(groups[name] for name in removed))
    if added:
        user.groups.add(*(groups[name] for name in added))
    if OPERATORS in roles:
        grant_operator_permissions(groups[OPERATORS])
    return added, removed
