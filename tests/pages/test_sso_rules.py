"""Single sign-on's rules without a provider (docs/operating.md#single-sign-on): the
group mapping and its sync (runs/identities.py, on the real database), the settings
checks (config/checks.py), LOCAL_LOGIN=0, and a provider that cannot be reached. The
flow against a real provider is tests/pages/test_sso_flow.py."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User

from config.checks import proxy_settings, single_sign_on_settings
from config.settings import authentication_backends
from runs.identities import Person, Refused, granted, parse_role_groups, sign_in
from runs.models import SignInIdentity
from tests.conftest import PASSWORD, make_user
from tests.support.api import api_token
from tests.support.oidc import free_port

MAPPING = parse_role_groups(
    "operators=ops-team,operators=sre,viewers=support,submitters=ci-bots,staff=platform-admins"
)
ISSUER = "https://idp.example.com"


def person(groups: list[str], username: str = "olivia", subject: str = "s-1") -> Person:
    return Person(issuer=ISSUER, subject=subject, username=username, groups=tuple(groups))


def roles(user: User) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_the_mapping_reads_role_group_pairs():
    assert MAPPING == {
        "operators": ("ops-team", "sre"),
        "viewers": ("support",),
        "submitters": ("ci-bots",),
        "staff": ("platform-admins",),
    }
    assert parse_role_groups(" viewers = support , ,") == {"viewers": ("support",)}
    with pytest.raises(ValueError, match="'admins' is not a role"):
        parse_role_groups("admins=ops")
    with pytest.raises(ValueError, match="'operators' is not role=group"):
        parse_role_groups("operators")


def test_groups_give_roles_and_staff():
    assert granted(["sre", "support", "x"], MAPPING) == ({"operators", "viewers"}, False)
    assert granted(["platform-admins", "ci-bots"], MAPPING) == ({"submitters"}, True)
    assert granted(["platform-admins"], MAPPING) == (frozenset(), True)
    assert granted([], MAPPING) == (frozenset(), False)


def test_each_sign_in_sets_the_roles_exactly(db):
    done = sign_in(person(["ops-team", "support", "platform-admins"]), MAPPING)
    user = done.user
    assert (done.created, roles(user), user.is_staff) == (True, {"operators", "viewers"}, True)

    done = sign_in(person(["support", "ci-bots"]), MAPPING)

    user.refresh_from_db()
    assert (done.created, done.user.pk) == (False, user.pk)
    assert (roles(user), user.is_staff) == ({"viewers", "submitters"}, False)
    assert (done.added, done.removed) == ({"submitters"}, {"operators"})


def test_superuser_is_never_granted_and_is_taken_away(db):
    user = sign_in(person(["ops-team"]), MAPPING).user
    User.objects.filter(pk=user.pk).update(is_superuser=True)  # by hand, in the shell

    sign_in(person(["ops-team"]), MAPPING)

    user.refresh_from_db()
    assert user.is_superuser is False


def test_no_mapped_group_is_refused_and_takes_the_roles_away(db):
    with pytest.raises(Refused) as refused:
        sign_in(person(["lunch-club"]), MAPPING)
    assert (refused.value.reason, refused.value.groups) == ("no-role", ("lunch-club",))
    assert User.objects.count() == 0

    user = sign_in(person(["ops-team", "platform-admins"]), MAPPING).user
    with pytest.raises(Refused):
        sign_in(person(["platform-admins"]), MAPPING)  # staff alone is no role

    user.refresh_from_db()
    assert (roles(user), user.is_staff) == (set(), False)


@pytest.mark.parametrize("username", ["team:olivia", "", " olivia", "x" * 151])
def test_a_username_that_cannot_be_a_principal_is_refused(db, username):
    with pytest.raises(Refused) as refused:
        sign_in(person(["ops-team"], username=username), MAPPING)
    assert refused.value.reason == "username"
    assert User.objects.count() == 0


def test_an_unlinked_account_is_never_taken_over(db):
    local = make_user("olivia", "viewers")
    with pytest.raises(Refused) as refused:
        sign_in(person(["ops-team"]), MAPPING)
    assert refused.value.reason == "taken"
    local.refresh_from_db()
    assert (roles(local), SignInIdentity.objects.count()) == ({"viewers"}, 0)


def test_a_rename_onto_another_account_is_refused(db):
    make_user("sam", "viewers")
    user = sign_in(person(["ops-team"]), MAPPING).user
    with pytest.raises(Refused) as refused:
        sign_in(person(["ops-team"], username="sam"), MAPPING)
    assert refused.value.reason == "taken"
    user.refresh_from_db()
    assert user.username == "olivia"


def test_the_same_subject_at_another_issuer_is_another_person(db):
    sign_in(person(["ops-team"]), MAPPING)
    other = Person(issuer="https://other.example", subject="s-1", username="olivia", groups=())
    with pytest.raises(Refused):
        sign_in(other, MAPPING)  # no role there; and "olivia" here is linked elsewhere
    with pytest.raises(Refused) as refused:
        sign_in(Person("https://other.example", "s-1", "olivia", ("ops-team",)), MAPPING)
    assert refused.value.reason == "taken"


def test_a_deactivated_account_is_refused(db):
    user = sign_in(person(["ops-team"]), MAPPING).user
    User.objects.filter(pk=user.pk).update(is_active=False)
    with pytest.raises(Refused) as refused:
        sign_in(person(["ops-team"]), MAPPING)
    assert refused.value.reason == "inactive"


# --- Settings ------------------------------------------------------------------


def sso_settings(settings, **values):
    settings.OIDC_ISSUER = ISSUER
    settings.OIDC_CLIENT_ID = "durable-runs"
    settings.OIDC_CLIENT_SECRET = "secret"
    settings.OIDC_ROLE_GROUPS = "operators=ops-team"
    settings.OIDC_SCOPES = "openid email profile groups"
    settings.LOCAL_LOGIN = True
    for name, value in values.items():
        setattr(settings, name, value)


def problems() -> list[tuple[str, str]]:
    return [(p.id, p.msg) for p in single_sign_on_settings()]


def test_the_settings_checks_pass_when_off_and_when_complete(settings):
    sso_settings(settings, OIDC_ISSUER="", OIDC_CLIENT_ID="", OIDC_CLIENT_SECRET="")
    settings.OIDC_ROLE_GROUPS = ""
    assert problems() == []
    sso_settings(settings)
    assert problems() == []


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (
            {"OIDC_CLIENT_ID": ""},
            [("durable_runs.E013", "OIDC_ISSUER is set but OIDC_CLIENT_ID is not.")],
        ),
        (
            {"OIDC_ROLE_GROUPS": "operators=ops,admins=root"},
            [
                (
                    "durable_runs.E015",
                    "OIDC_ROLE_GROUPS: 'admins' is not a role (one of operators, viewers, "
                    "submitters, staff).",
                )
            ],
        ),
        (
            {"OIDC_ROLE_GROUPS": "staff=platform-admins"},
            [
                (
                    "durable_runs.E016",
                    "OIDC_ROLE_GROUPS gives no role (operators, viewers or submitters): every "
                    "sign-in would be refused.",
                )
            ],
        ),
        (
            {"OIDC_ISSUER": "idp.example.com"},
            [
                (
                    "durable_runs.E012",
                    "OIDC_ISSUER must be an https:// (or, to try, http://) URL, not "
                    "'idp.example.com'.",
                )
            ],
        ),
        (
            {"OIDC_SCOPES": "email groups"},
            [("durable_runs.E014", "OIDC_SCOPES must include openid, not 'email groups'.")],
        ),
        (
            {"OIDC_ISSUER": "", "LOCAL_LOGIN": False},
            [
                (
                    "durable_runs.E010",
                    "OIDC_CLIENT_ID is set but OIDC_ISSUER is not: single sign-on stays off.",
                ),
                (
                    "durable_runs.E010",
                    "OIDC_CLIENT_SECRET is set but OIDC_ISSUER is not: single sign-on stays off.",
                ),
                (
                    "durable_runs.E010",
                    "OIDC_ROLE_GROUPS is set but OIDC_ISSUER is not: single sign-on stays off.",
                ),
                (
                    "durable_runs.E011",
                    "LOCAL_LOGIN=0 without single sign-on (OIDC_ISSUER): nobody could sign in "
                    "to the pages.",
                ),
            ],
        ),
    ],
    ids=["no-client-id", "unknown-role", "staff-only", "not-a-url", "no-openid", "off"],
)
def test_the_settings_checks_say_what_is_wrong(settings, values, expected):
    sso_settings(settings, **values)
    assert problems() == expected


def test_without_local_login_no_backend_checks_a_password():
    assert "django.contrib.auth.backends.ModelBackend" in authentication_backends(True)
    assert authentication_backends(False) == [
        "axes.backends.AxesStandaloneBackend",
        "runs.web.sso.Backend",
    ]


# --- The login page ---------------------------------------------------------------


def test_the_login_page_offers_only_the_password_form_while_sso_is_off(client, db):
    page = client.get("/login/").content.decode()
    assert 'name="password"' in page
    assert "Sign in with" not in page
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/").status_code == 404


def test_the_login_page_offers_both_by_default_with_sso_on(client, settings, db):
    sso_settings(settings, OIDC_PROVIDER_NAME="Okta")
    page = client.get("/login/", {"next": "/runs/"}).content.decode()
    link = '<a class="btn btn-primary" href="/oidc/authenticate/?next=%2Fruns%2F">'
    assert f"{link}Sign in with Okta</a>" in page
    assert 'name="password"' in page


@pytest.fixture
def sso_only(settings, db):
    sso_settings(settings, LOCAL_LOGIN=False, OIDC_PROVIDER_NAME="Okta")
    settings.AUTHENTICATION_BACKENDS = authentication_backends(False)


def test_without_local_login_the_form_is_gone_and_a_password_is_refused(client, sso_only):
    make_user("paula", "operators")
    page = client.get("/login/").content.decode()
    assert "Sign in with Okta" in page
    assert 'name="password"' not in page

    answer = client.post("/login/", {"username": "paula", "password": PASSWORD})

    assert answer.status_code == 403
    assert "Signing in with a username and password is turned off here" in answer.content.decode()
    assert "_auth_user_id" not in client.session
    assert client.get("/").status_code == 302  # still not signed in


def test_without_local_login_the_admin_sends_people_to_single_sign_on(client, sso_only):
    answer = client.get("/admin/", follow=True)

    assert answer.redirect_chain[-1] == ("/login/?next=/admin/", 302)
    page = answer.content.decode()
    assert 'href="/oidc/authenticate/?next=%2Fadmin%2F">Sign in with Okta</a>' in page
    assert 'name="password"' not in page


def test_without_local_login_an_api_token_still_works(client, sso_only):
    key = api_token(make_user("ci", "submitters"))

    answer = client.get("/api/workflows/", HTTP_AUTHORIZATION=f"Token {key}")

    assert answer.status_code == 200


def test_a_provider_that_cannot_be_reached_is_said_so(client, settings, db):
    closed = f"http://127.0.0.1:{free_port()}"
    sso_settings(settings, OIDC_ISSUER=closed)

    answer = client.get("/oidc/authenticate/")

    assert answer.status_code == 503
    page = answer.content.decode()
    assert f"could not be read from {closed}/.well-known/openid-configuration" in page
    assert "_auth_user_id" not in client.session


def test_the_deploy_check_warns_of_an_issuer_without_https(settings):
    sso_settings(settings, OIDC_ISSUER="http://idp.example.com")
    assert [(w.id, w.msg) for w in proxy_settings()] == [
        (
            "durable_runs.W002",
            "OIDC_ISSUER 'http://idp.example.com' is not https: the provider's configuration, "
            "keys and tokens would travel unprotected.",
        )
    ]
    sso_settings(settings)
    assert proxy_settings() == []
