"""Single sign-on by OpenID Connect, with mozilla-django-oidc (docs/operating.md#single-sign-on).

The library does the authorization code flow (state, nonce and PKCE in the session);
this module adds what it leaves to its users:
- the provider's endpoints come from its discovery document (OIDC_ISSUER's
  /.well-known/openid-configuration), read at the first sign-in and kept for an hour,
  never when a process starts (a provider that is down stops nobody's local login);
- the ID token is verified completely: signature by the provider's published key, issuer,
  audience (the library does not check it), expiry, issue time, nonce;
- who the person is and which roles they get is runs/identities.py's, and a refusal is a
  page (403) that says why, not a redirect to the login page;
- logout also ends the session at the provider when it offers end_session_endpoint.

django-axes: a sign-in through the provider is not a password guess (the provider
checked the password, and throttles its own). Its callback is kept out of axes' counting
(runs/web/accounts.LoginAttemptHandler), so neither refusals nor an address locked out
for password failures stop it.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase
from django.shortcuts import render
from django.urls import reverse
from django.views import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from runs.identities import Person, Refused, parse_role_groups, sign_in

log = logging.getLogger("durable_runs.auth")

DISCOVERY_TTL_SECONDS = 3600.0
# Asymmetric algorithms only: with HS256 the client secret would sign, and anyone holding
# it (this app) could mint tokens.
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")


def enabled() -> bool:
    return bool(settings.OIDC_ISSUER)


class ProviderUnavailable(Exception):
    pass


@dataclass(frozen=True)
class ProviderConfig:
    issuer: str
    authorization_endpoint: str
    token_endpoint: str
    userinfo_endpoint: str | None
    jwks_uri: str
    end_session_endpoint: str | None
    algorithms: tuple[str, ...]


_discovered: dict[str, tuple[float, ProviderConfig]] = {}
_lock = threading.Lock()


def discovery_url(issuer: str) -> str:
    return issuer.rstrip("/") + "/.well-known/openid-configuration"


def provider_config() -> ProviderConfig:
    """The provider's endpoints, from its discovery document (cached per process)."""
    issuer = settings.OIDC_ISSUER
    now = time.monotonic()
    with _lock:
        cached = _discovered.get(issuer)
        if cached is not None and now - cached[0] < DISCOVERY_TTL_SECONDS:
            return cached[1]
    url = discovery_url(issuer)
    try:
        response = requests.get(url, timeout=settings.OIDC_TIMEOUT_SECONDS)
        response.raise_for_status()
        doc = response.json()
        config = ProviderConfig(
            issuer=doc["issuer"],
            authorization_endpoint=doc["authorization_endpoint"],
            token_endpoint=doc["token_endpoint"],
            userinfo_endpoint=doc.get("userinfo_endpoint"),
            jwks_uri=doc["jwks_uri"],
            end_session_endpoint=doc.get("end_session_endpoint"),
            algorithms=tuple(doc.get("id_token_signing_alg_values_supported") or ("RS256",)),
        )
    except (requests.RequestException, ValueError, KeyError, TypeError) as exc:
        raise ProviderUnavailable(
            f"the sign-in provider's configuration could not be read from {url}: {exc}"
        ) from exc
    if config.issuer != issuer:
        # OpenID Connect Discovery 1.0, 4.3: a mismatch is a misconfiguration or an attack.
        raise ProviderUnavailable(
            f"the provider at {url} says its issuer is {config.issuer!r}, not OIDC_ISSUER "
            f"{issuer!r}: set OIDC_ISSUER to exactly its issuer"
        )
    with _lock:
        _discovered[issuer] = (now, config)
    return config


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def form_action_origins() -> tuple[str, ...]:
    """Where the Log out form's redirect may lead (config/security.py): the issuer's
    origin, and its end_session_endpoint's once discovered (never fetched for this)."""
    issuer = settings.OIDC_ISSUER
    if not issuer:
        return ()
    origins = [origin(issuer)]
    with _lock:
        cached = _discovered.get(issuer)
    if cached is not None and cached[1].end_session_endpoint:
        ending = origin(cached[1].end_session_endpoint)
        if ending not in origins:
            origins.append(ending)
    return tuple(origins)


def role_mapping() -> dict[str, tuple[str, ...]]:
    return parse_role_groups(settings.OIDC_ROLE_GROUPS)


def groups_of(claims: dict[str, Any]) -> tuple[str, ...]:
    value = claims.get(settings.OIDC_GROUPS_CLAIM)
    if isinstance(value, str):
        return (value,)
    if isinstance(value, list | tuple):
        return tuple(str(g) for g in value)
    return ()


class Backend(OIDCAuthenticationBackend):
    """mozilla-django-oidc's backend, reading the provider's endpoints lazily and
    verifying the ID token fully. It acts only on the callback of a sign-in
    (CallbackView marks the request), so a password login never reaches the network."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Not the library's: it reads every endpoint from the settings here, and Django
        # makes a backend for every request that has a session.
        self.UserModel = get_user_model()

    @property
    def OIDC_OP_TOKEN_ENDPOINT(self) -> str:  # the library's names
        return provider_config().token_endpoint

    @property
    def OIDC_OP_USER_ENDPOINT(self) -> str | None:
        return provider_config().userinfo_endpoint

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return str(settings.OIDC_CLIENT_ID)

    @property
    def OIDC_RP_CLIENT_SECRET(self) -> str:
        return str(settings.OIDC_CLIENT_SECRET)

    def authenticate(self, request: Any, **kwargs: Any) -> Any:
        if request is None or not getattr(request, "sso_callback", False) or not enabled():
            return None
        try:
            return super().authenticate(request, **kwargs)
        except Refused as refusal:
            request.sso_refusal = refusal
        except jwt.ExpiredSignatureError:
            request.sso_refusal = Refused(
                "token",
                "The provider's sign-in token had already expired when it arrived here: "
                "the provider's clock or this server's may be wrong.",
            )
        except jwt.InvalidAudienceError:
            request.sso_refusal = Refused(
                "token", "The provider's sign-in token was issued to another application."
            )
        except (jwt.InvalidTokenError, SuspiciousOperation) as exc:
            request.sso_refusal = Refused("token", f"The sign-in could not be verified: {exc}")
        except (ProviderUnavailable, requests.RequestException) as exc:
            request.sso_refusal = Refused("unavailable", f"The sign-in provider failed: {exc}")
        return None

    def signing_key(self, token: str, config: ProviderConfig) -> jwt.PyJWK:
        header = jwt.get_unverified_header(token)
        alg = header.get("alg")
        if alg not in ALGORITHMS or alg not in config.algorithms:
            raise jwt.InvalidAlgorithmError(f"the token is signed with {alg!r}, not accepted here")
        response = requests.get(config.jwks_uri, timeout=settings.OIDC_TIMEOUT_SECONDS)
        response.raise_for_status()
        kid = header.get("kid")
        for jwk in response.json().get("keys", []):
            if jwk.get("use", "sig") != "sig" or (kid is not None and jwk.get("kid") != kid):
                continue
            if jwk.get("alg", alg) != alg:
                continue
            return jwt.PyJWK(jwk, algorithm=alg)
        raise jwt.InvalidSignatureError(f"the provider publishes no key {kid!r} for {alg}")

    def verify_token(self, token: str, **kwargs: Any) -> dict[str, Any]:
        config = provider_config()
        key = self.signing_key(token, config)
        payload: dict[str, Any] = jwt.decode(
            token,
            key,
            algorithms=[key.algorithm_name],
            audience=self.OIDC_RP_CLIENT_ID,
            issuer=config.issuer,
            leeway=settings.OIDC_LEEWAY_SECONDS,
            options={"require": ["exp", "iat", "iss", "aud", "sub"]},
        )
        audiences = payload["aud"] if isinstance(payload["aud"], list) else [payload["aud"]]
        if len(audiences) > 1 and payload.get("azp") != self.OIDC_RP_CLIENT_ID:
            raise jwt.InvalidAudienceError("the token was issued to another party (azp)")
        if payload.get("nonce") != kwargs.get("nonce"):
            raise SuspiciousOperation("the token's nonce is not this sign-in's")
        return payload

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        claims = dict(payload)
        if self.OIDC_OP_USER_ENDPOINT:
            userinfo = self.get_userinfo(access_token, id_token, payload)
            if userinfo.get("sub") != payload["sub"]:
                # Not SuspiciousOperation: the library would swallow it, unexplained.
                raise Refused("token", "The provider's user information is of another person.")
            claims.update({k: v for k, v in userinfo.items() if k not in ("iss", "aud")})
        person = Person(
            issuer=payload["iss"],
            subject=payload["sub"],
            username=str(claims.get(settings.OIDC_USERNAME_CLAIM) or ""),
            groups=groups_of(claims),
        )
        try:
            done = sign_in(person, role_mapping())
        except Refused as refusal:
            log.warning(
                "single sign-on refused %s (%s at %s): %s",
                person.username,
                person.subject,
                person.issuer,
                refusal.reason,
                extra={"sso_refusal": refusal.reason, "idp_groups": list(person.groups)},
            )
            raise
        log.info(
            "signed in by single sign-on: %s (%s at %s), roles %s%s%s%s",
            done.user.username,
            person.subject,
            person.issuer,
            ", ".join(sorted(done.roles)),
            ", staff" if done.staff else "",
            f"; added {', '.join(sorted(done.added))}" if done.added else "",
            f"; removed {', '.join(sorted(done.removed))}" if done.removed else "",
            extra={"renamed_from": done.renamed_from, "account_created": done.created},
        )
        return done.user


def refused(request: HttpRequest, refusal: Refused) -> HttpResponse:
    status = 503 if refusal.reason == "unavailable" else 403
    return render(
        request,
        "accounts/sso_refused.html",
        {
            "refusal": refusal,
            "provider_name": settings.OIDC_PROVIDER_NAME,
            "local_login": settings.LOCAL_LOGIN,
        },
        status=status,
    )


class AuthenticateView(OIDCAuthenticationRequestView):
    """/oidc/authenticate/: to the provider, with state, nonce and a PKCE challenge."""

    def __init__(self, **kwargs: Any) -> None:
        View.__init__(self, **kwargs)  # not the library's: it reads the endpoint here

    @property
    def OIDC_OP_AUTH_ENDPOINT(self) -> str:
        return provider_config().authorization_endpoint

    @property
    def OIDC_RP_CLIENT_ID(self) -> str:
        return str(settings.OIDC_CLIENT_ID)

    def get(self, request: HttpRequest) -> HttpResponseBase:
        if not enabled():
            raise Http404("single sign-on is off")
        try:
            response: HttpResponseBase = super().get(request)
        except ProviderUnavailable as exc:
            log.error("single sign-on unavailable: %s", exc)
            return refused(request, Refused("unavailable", f"The sign-in provider failed: {exc}"))
        return response


class CallbackView(OIDCAuthenticationCallbackView):
    """/oidc/callback/: the provider's answer; signed in, or a page saying why not."""

    def get(self, request: HttpRequest) -> HttpResponseBase:
        if not enabled():
            raise Http404("single sign-on is off")
        request.sso_callback = True  # type: ignore[attr-defined]
        response: HttpResponseBase = super().get(request)
        return response

    def login_failure(self) -> HttpResponse:
        request = self.request
        refusal = getattr(request, "sso_refusal", None)
        if refusal is None and request.GET.get("error"):
            said = request.GET.get("error_description") or request.GET["error"]
            refusal = Refused("provider", f"The sign-in provider answered: {said}")
        if refusal is None:
            refusal = Refused(
                "incomplete",
                "The sign-in did not complete: it was started in another browser session "
                "or had expired. Start it again.",
            )
        if refusal.reason != "no-role":  # that one was logged with the person's groups
            log.warning("single sign-on refused: %s", refusal.message)
        return refused(request, refusal)


def end_session_url(request: HttpRequest, id_token: str | None) -> str | None:
    """Where to send a person signing out whose session came from the provider, when it
    offers RP-initiated logout; back to our login page from there."""
    if not enabled():
        return None
    try:
        endpoint = provider_config().end_session_endpoint
    except ProviderUnavailable as exc:
        log.warning("signed out here only: %s", exc)
        return None
    if not endpoint:
        return None
    params = {
        "client_id": settings.OIDC_CLIENT_ID,
        "post_logout_redirect_uri": request.build_absolute_uri(reverse("login")),
    }
    if id_token:
        params["id_token_hint"] = id_token
    return f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(params)}"
