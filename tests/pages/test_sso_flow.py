"""Single sign-on against a real OpenID Connect provider (node's oidc-provider, a process
of the tests' own: tests/support/oidc.py), the app driven through Django's client: the
app's token exchange, key fetch and userinfo are real HTTP to the provider
(docs/operating.md#single-sign-on)."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import jwt
import pytest
from axes.models import AccessAttempt
from django.contrib.auth.models import User

from runs.models import SignInIdentity
from runs.web import sso
from tests.conftest import PASSWORD, make_user
from tests.support import oidc

pytestmark = pytest.mark.live

APP = "http://testserver"


@pytest.fixture(scope="module")
def provider(tmp_path_factory) -> Any:
    with oidc.running_provider(tmp_path_factory.mktemp("idp"), [APP]) as running:
        yield running


@pytest.fixture
def idp(provider, settings, db) -> Any:
    oidc.configure(settings, provider)
    provider.accounts.clear()
    return provider


def sign_in(client, provider, login: str, next_url: str = "/") -> Any:
    """The whole code flow: the app's authorization request, the provider's login form,
    the provider's redirect back to the app's callback."""
    start = client.get("/oidc/authenticate/", {"next": next_url})
    assert start.status_code == 302
    query = parse_qs(urlsplit(start["Location"]).query)
    # state, nonce and a PKCE challenge on every authorization request.
    assert {"state", "nonce", "code_challenge"} <= set(query)
    assert query["code_challenge_method"] == ["S256"]
    back = oidc.login_at_provider(start["Location"], login, APP)
    return client.get(back.removeprefix(APP))


def signed_in_as(client) -> str | None:
    page = client.get("/login/")
    if page.status_code == 302:  # a signed-in user is sent on
        return str(client.session.get("_auth_user_id"))
    return None


def roles(user: User) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_an_operator_signs_in_and_gets_exactly_the_roles_of_their_groups(client, idp):
    idp.set_account("olivia", ["ops-team", "platform-admins", "unrelated"])

    answer = sign_in(client, idp, "olivia", "/runs/")

    assert (answer.status_code, answer["Location"]) == (302, "/runs/")
    user = User.objects.get(username="olivia")
    assert roles(user) == {"operators"}
    assert (user.is_staff, user.is_superuser, user.has_usable_password()) == (True, False, False)
    assert (
        SignInIdentity.objects.filter(user=user, issuer=idp.issuer, subject="sub-olivia").count()
        == 1
    )
    assert client.get("/runs/").status_code == 200
    # The operators' admin permissions come with the role, as from createoperator.
    assert user.has_perm("runs.change_retentionpolicy")


def test_groups_removed_at_the_provider_are_removed_at_the_next_sign_in(client, idp):
    idp.set_account("olivia", ["ops-team", "support", "platform-admins"])
    sign_in(client, idp, "olivia")
    user = User.objects.get(username="olivia")
    assert (roles(user), user.is_staff) == ({"operators", "viewers"}, True)
    client.post("/logout/")

    idp.set_account("olivia", ["support"])
    answer = sign_in(client, idp, "olivia")

    assert answer.status_code == 302
    user.refresh_from_db()
    assert (roles(user), user.is_staff) == ({"viewers"}, False)
    assert signed_in_as(client) == str(user.pk)
    assert User.objects.count() == 1  # the same account, not a second one


def test_a_person_left_in_no_mapped_group_is_refused_and_loses_the_roles(client, idp):
    idp.set_account("olivia", ["ops-team"])
    sign_in(client, idp, "olivia")
    client.post("/logout/")

    idp.set_account("olivia", ["lunch-club"])
    answer = sign_in(client, idp, "olivia")

    assert answer.status_code == 403
    text = answer.content.decode()
    assert "none of your groups there gives you a role here" in text
    assert "<li><code>lunch-club</code></li>" in text
    assert "Ask your administrator" in text
    assert signed_in_as(client) is None
    user = User.objects.get(username="olivia")
    assert (roles(user), user.is_staff) == (set(), False)


def test_someone_unmapped_is_refused_and_nothing_is_made(client, idp):
    idp.set_account("uma", ["lunch-club", "marketing"])

    answer = sign_in(client, idp, "uma")

    assert answer.status_code == 403
    assert "<li><code>lunch-club</code></li><li><code>marketing</code></li>" in (
        answer.content.decode()
    )
    assert signed_in_as(client) is None
    assert (User.objects.count(), SignInIdentity.objects.count()) == (0, 0)


def test_a_local_account_of_the_same_name_is_not_taken_over(client, idp):
    local = make_user("olivia", "viewers")
    idp.set_account("olivia", ["ops-team"])

    answer = sign_in(client, idp, "olivia")

    assert answer.status_code == 403
    assert "An account named olivia already exists here and is not linked" in (
        answer.content.decode()
    )
    assert signed_in_as(client) is None
    local.refresh_from_db()
    assert (roles(local), local.is_staff, SignInIdentity.objects.count()) == ({"viewers"}, False, 0)
    assert local.check_password(PASSWORD)


def test_a_username_the_principals_cannot_record_is_refused(client, idp):
    idp.set_account("colon", ["ops-team"], username="team:olivia")

    answer = sign_in(client, idp, "colon")

    assert answer.status_code == 403
    assert "may not contain &#x27;:&#x27;" in answer.content.decode()
    assert (User.objects.count(), SignInIdentity.objects.count()) == (0, 0)


def test_a_renamed_person_keeps_their_account_under_the_new_name(client, idp):
    idp.set_account("olivia", ["ops-team"])
    sign_in(client, idp, "olivia")
    first = User.objects.get()
    client.post("/logout/")

    idp.set_account("olivia", ["ops-team"], username="olivia.smith")
    sign_in(client, idp, "olivia")

    renamed = User.objects.get()
    assert (renamed.pk, renamed.username) == (first.pk, "olivia.smith")
    assert signed_in_as(client) == str(first.pk)


def test_refused_sign_ins_are_not_counted_as_failed_logins(client, idp, settings):
    """axes wraps authenticate(): the provider's callback is outside its counts, so
    refusals do not lock an address out, and an address locked out for password
    failures can still sign in at the provider."""
    settings.AXES_ADDRESS_FAILURE_LIMIT = 2
    idp.set_account("uma", ["lunch-club"])
    for _ in range(6):  # more than AXES_FAILURE_LIMIT
        assert sign_in(client, idp, "uma").status_code == 403
    assert AccessAttempt.objects.count() == 0
    for name in ("a", "b"):
        client.post("/login/", {"username": name, "password": "wrong"})
    assert client.post("/login/", {"username": "c", "password": "wrong"}).status_code == 429

    idp.set_account("olivia", ["ops-team"])
    answer = sign_in(client, idp, "olivia")

    assert (answer.status_code, answer["Location"]) == (302, "/")
    assert signed_in_as(client) == str(User.objects.get(username="olivia").pk)


def test_logout_ends_the_session_here_and_at_the_provider(client, idp):
    idp.set_account("olivia", ["ops-team"])
    sign_in(client, idp, "olivia")
    id_token = client.session["oidc_id_token"]

    answer = client.post("/logout/")

    assert answer.status_code == 302
    target = urlsplit(answer["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == f"{idp.issuer}/session/end"
    assert parse_qs(target.query) == {
        "client_id": [oidc.CLIENT_ID],
        "post_logout_redirect_uri": [f"{APP}/login/"],
        "id_token_hint": [id_token],
    }
    assert signed_in_as(client) is None


def test_a_password_login_logs_out_locally_only(client, idp):
    make_user("paula", "operators")
    client.post("/login/", {"username": "paula", "password": PASSWORD})

    answer = client.post("/logout/")

    assert (answer.status_code, answer["Location"]) == (302, "/login/")


# --- The ID token: each check the library leaves out, against real tokens ----------


def test_a_token_issued_to_another_application_is_refused(idp):
    idp.set_account("olivia-other", ["ops-team"])
    token = oidc.token_for_other_client(idp, "olivia-other", nonce="n-1")
    assert jwt.decode(token, options={"verify_signature": False})["aud"] == oidc.OTHER_CLIENT_ID

    with pytest.raises(jwt.InvalidAudienceError):
        sso.Backend().verify_token(token, nonce="n-1")


def test_a_tampered_or_unsigned_token_is_refused(idp):
    idp.set_account("olivia", ["ops-team"])
    token = oidc.token_for_other_client(idp, "olivia", nonce="n-2")
    header, payload, signature = token.split(".")
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    claims["aud"] = oidc.CLIENT_ID  # as if it had been issued to us

    def encode(data: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()

    with pytest.raises(jwt.InvalidSignatureError):
        sso.Backend().verify_token(f"{header}.{encode(claims)}.{signature}", nonce="n-2")
    unsigned = f"{encode({'alg': 'none', 'typ': 'JWT'})}.{encode(claims)}."
    with pytest.raises(jwt.InvalidAlgorithmError):
        sso.Backend().verify_token(unsigned, nonce="n-2")


def test_an_expired_token_is_refused_and_nothing_is_made(client, settings, db, tmp_path):
    """A second provider whose clock is ten minutes behind (libfaketime) and whose ID
    tokens last a minute: the one it signs expired nine minutes ago by our clock, well
    past OIDC_LEEWAY_SECONDS."""
    with oidc.running_provider(tmp_path, [APP], offset="-10m", id_token_ttl=60) as late:
        oidc.configure(settings, late)
        late.set_account("olivia", ["ops-team"])

        answer = sign_in(client, late, "olivia")

    assert answer.status_code == 403
    assert "had already expired when it arrived here" in answer.content.decode()
    assert signed_in_as(client) is None
    assert (User.objects.count(), SignInIdentity.objects.count()) == (0, 0)
