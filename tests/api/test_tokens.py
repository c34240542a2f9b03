"""API tokens (`createoperator NAME --token | --rotate-token | --revoke-tokens`), through
real requests: stored only as a hash, expiring after API_TOKEN_TTL_DAYS, rotated and
revoked from the command line, refused in the API's one error shape."""

from __future__ import annotations

import io
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from django.db import connection
from django.test import Client
from django.utils import timezone
from knox.models import AuthToken

from tests.conftest import PASSWORD, make_user
from tests.support.api import error_of


class Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


@pytest.fixture(autouse=True)
def no_password_variable(monkeypatch):
    monkeypatch.delenv("OPERATOR_PASSWORD", raising=False)


def createoperator(*args: str) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("createoperator", *args, stdin=Pipe(), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def new_token(name: str, *flags: str) -> str:
    """The token the command prints: its only line on stdout."""
    out, _ = createoperator(name, *flags)
    assert out.endswith("\n") and out.count("\n") == 1, out
    return out.strip()


def get_runs(token: str, path: str = "/api/runs/") -> object:
    return Client().get(path, HTTP_AUTHORIZATION=f"Token {token}")


def age_tokens(user: User, days: float) -> None:
    """As if `days` had passed since the user's tokens were made: move their times back."""
    shift = timedelta(days=days)
    for row in AuthToken.objects.filter(user=user):
        row.created -= shift
        if row.expiry is not None:
            row.expiry -= shift
        row.save(update_fields=["created", "expiry"])


def rows_containing(text: str) -> list[str]:
    """Every table with a row whose text (all its columns) contains `text`."""
    hits = []
    with connection.cursor() as cursor:
        for table in connection.introspection.table_names(cursor):
            quoted = connection.ops.quote_name(table)
            cursor.execute(
                f"SELECT count(*) FROM {quoted} AS t WHERE t::text LIKE %s", [f"%{text}%"]
            )
            if cursor.fetchone()[0]:
                hits.append(table)
    return hits


# --- a token works, and is not stored -------------------------------------------------
def test_token_from_createoperator_authenticates(db):
    token = new_token("alice", "--token")

    response = get_runs(token)

    assert response.status_code == 200, response.content


def test_token_is_stored_only_as_a_hash(db):
    token = new_token("alice", "--token")

    assert get_runs(token).status_code == 200
    assert rows_containing(token) == []
    assert rows_containing(token[len(token) // 2 :]) == []  # nor its second half


# --- expiry ---------------------------------------------------------------------------
def test_token_expires_after_api_token_ttl_days(db):
    token = new_token("alice", "--token")
    alice = User.objects.get(username="alice")

    age_tokens(alice, 89)
    assert get_runs(token).status_code == 200  # still within the default 90 days
    age_tokens(alice, 2)

    error = error_of(get_runs(token), 401, "authentication_failed")
    assert "expired" in error["message"]
    assert "--rotate-token" in error["message"]


def test_expired_token_keeps_saying_expired(db):
    """A second call with the same expired token is told the same, not 'Invalid token.'."""
    token = new_token("alice", "--token")
    age_tokens(User.objects.get(username="alice"), 91)

    first = error_of(get_runs(token), 401, "authentication_failed")
    again = error_of(get_runs(token), 401, "authentication_failed")

    assert first == again
    assert get_runs(token)["WWW-Authenticate"] == "Token"


def test_token_ttl_is_read_from_settings_when_the_token_is_made(db, settings):
    settings.REST_KNOX = {**settings.REST_KNOX, "TOKEN_TTL": timedelta(days=7)}
    token = new_token("alice", "--token")
    alice = User.objects.get(username="alice")

    age_tokens(alice, 6.9)
    assert get_runs(token).status_code == 200
    age_tokens(alice, 0.2)
    error_of(get_runs(token), 401, "authentication_failed")


def test_token_without_expiry_when_ttl_is_none(db, settings):
    settings.REST_KNOX = {**settings.REST_KNOX, "TOKEN_TTL": None}
    _, err = createoperator("alice", "--token")

    assert AuthToken.objects.get(user__username="alice").expiry is None
    assert "never expires" in err


def test_token_expiry_is_told_when_it_is_made(db):
    _, err = createoperator("alice", "--token")

    expiry = AuthToken.objects.get(user__username="alice").expiry
    assert expiry is not None
    assert abs(expiry - (timezone.now() + timedelta(days=90))) < timedelta(minutes=1)
    assert f"valid until {expiry:%Y-%m-%d %H:%M} UTC" in err


# --- several tokens, rotation, revocation ----------------------------------------------
def test_token_twice_gives_two_working_tokens(db):
    """Each --token is a new token (one per client, revoked together); none is printed
    again."""
    first = new_token("alice", "--token")
    second = new_token("alice", "--token")

    assert first != second
    assert get_runs(first).status_code == 200
    assert get_runs(second).status_code == 200


def test_rotate_token_revokes_the_old_ones_and_prints_a_new_one(db):
    old = [new_token("alice", "--token"), new_token("alice", "--token")]

    out, err = createoperator("alice", "--rotate-token")

    new = out.strip()
    for token in old:
        error = error_of(get_runs(token), 401, "authentication_failed")
        assert error["message"] == "Invalid token."
    assert get_runs(new).status_code == 200
    assert "revoked 2 API tokens of alice" in err.splitlines()


def test_revoke_tokens_revokes_every_token(db):
    tokens = [new_token("alice", "--token") for _ in range(3)]
    bob = new_token("bob", "--token")

    out, err = createoperator("alice", "--revoke-tokens")

    assert out == ""
    assert err.splitlines()[-1] == "revoked 3 API tokens of alice"
    for token in tokens:
        error_of(get_runs(token), 401, "authentication_failed")
    assert get_runs(bob).status_code == 200  # someone else's stay


def test_revoke_tokens_also_revokes_expired_ones(db):
    new_token("alice", "--token")
    age_tokens(User.objects.get(username="alice"), 365)

    _, err = createoperator("alice", "--revoke-tokens")

    assert err.splitlines()[-1] == "revoked 1 API token of alice"
    assert AuthToken.objects.count() == 0


@pytest.mark.parametrize("flag", ["--rotate-token", "--revoke-tokens"])
def test_rotate_or_revoke_for_an_unknown_account_changes_nothing(db, flag):
    with pytest.raises(CommandError) as refused:
        createoperator("nobody-here", flag)

    assert str(refused.value) == f"no account named nobody-here: {flag} needs an existing one"
    assert not User.objects.filter(username="nobody-here").exists()


@pytest.mark.parametrize(
    "flags", [("--token", "--rotate-token"), ("--token", "--revoke-tokens")], ids=str
)
def test_token_options_exclude_each_other(db, flags):
    with pytest.raises(CommandError, match="not allowed with argument"):
        createoperator("alice", *flags)


# --- a token for an existing account changes nothing else ------------------------------
def test_token_for_an_existing_account_keeps_its_role_and_password(db, monkeypatch):
    """A lingering OPERATOR_PASSWORD in the shell must not reset the password of whoever
    gets a token, nor the default role turn a viewer into an operator."""
    make_user("victor", "viewers")
    monkeypatch.setenv("OPERATOR_PASSWORD", "somebody else's passphrase")

    for flag in ("--token", "--rotate-token"):
        out, err = createoperator("victor", flag)

        victor = User.objects.get(username="victor")
        assert victor.check_password(PASSWORD)
        assert list(victor.groups.values_list("name", flat=True)) == ["viewers"]
        assert not victor.is_staff
        assert err.splitlines()[:2] == [
            "viewer victor: password and role unchanged",
            "OPERATOR_PASSWORD ignored: token options never change an existing password",
        ]
        assert get_runs(out.strip(), "/api/claims/").status_code == 200  # a viewer's list


def test_token_with_a_role_option_changes_the_role_only(db):
    make_user("victor", "viewers")

    createoperator("victor", "--operator", "--token")

    victor = User.objects.get(username="victor")
    assert list(victor.groups.values_list("name", flat=True)) == ["operators"]
    assert victor.check_password(PASSWORD)


# --- refusals in the error shape -------------------------------------------------------
def test_token_of_an_inactive_account_is_refused(db):
    token = new_token("alice", "--token")
    User.objects.filter(username="alice").update(is_active=False)

    error_of(get_runs(token), 401, "authentication_failed")


def test_token_that_is_not_utf8_is_refused_not_a_server_error(db):
    response = Client().get("/api/runs/", HTTP_AUTHORIZATION="Token caf\xe9")

    error_of(response, 401, "authentication_failed")


# --- the schema, and databases that had DRF's plain-text tokens --------------------------
def test_schema_names_the_token_scheme_and_its_expiry(db):
    from drf_spectacular.generators import SchemaGenerator

    schema = SchemaGenerator().get_schema(request=None, public=True)

    scheme = schema["components"]["securitySchemes"]["tokenAuth"]
    assert (scheme["type"], scheme["in"], scheme["name"]) == ("apiKey", "header", "Authorization")
    assert "Token <key>" in scheme["description"]
    assert "API_TOKEN_TTL_DAYS" in scheme["description"]
    assert schema["paths"]["/api/runs/"]["get"]["security"] == [
        {"tokenAuth": []},
        {"cookieAuth": []},
    ]


def test_migration_drops_the_plain_text_token_table(db):
    """A database from before knox: DRF's table with a key in clear, and its records."""
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamptz,"
            " user_id integer)"
        )
        cursor.execute("INSERT INTO authtoken_token VALUES ('plain-text-key', now(), 1)")
        cursor.execute(
            "INSERT INTO django_migrations (app, name, applied) VALUES "
            "('authtoken', '0001_initial', now())"
        )
    from django.contrib.auth.models import Permission
    from django.contrib.contenttypes.models import ContentType

    token_type = ContentType.objects.create(app_label="authtoken", model="token")
    Permission.objects.create(name="Can add token", codename="add_token", content_type=token_type)

    call_command("migrate", "api", "zero", verbosity=0)
    call_command("migrate", "api", verbosity=0)

    assert "authtoken_token" not in connection.introspection.table_names()
    assert rows_containing("plain-text-key") == []
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM django_migrations WHERE app = 'authtoken'")
        assert cursor.fetchone()[0] == 0
    assert not ContentType.objects.filter(app_label="authtoken").exists()
    assert not Permission.objects.filter(codename="add_token").exists()
