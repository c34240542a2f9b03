"""Checks of our own: deployment checks (`manage.py check --deploy`), settings that
each look fine alone but together leave a defence off; and the single sign-on
settings, checked by every command."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register

from runs.identities import MAPPABLE, STAFF, parse_role_groups


@register(Tags.security, deploy=True)
def proxy_settings(app_configs: Any = None, **kwargs: Any) -> list[Warning]:
    problems = []
    if getattr(settings, "SECURE_PROXY_SSL_HEADER", None) and settings.TRUSTED_PROXY_COUNT == 0:
        problems.append(
            Warning(
                "SECURE_PROXY_SSL_HEADER is set (a proxy is in front) but "
                "TRUSTED_PROXY_COUNT is 0: every client has the proxy's address, so one "
                "client's failed logins pause everyone's and the API's anonymous throttle "
                "is shared by all.",
                hint="Set TRUSTED_PROXY_COUNT to the number of proxies that append to "
                "X-Forwarded-For.",
                id="durable_runs.W001",
            )
        )
    if settings.OIDC_ISSUER.startswith("http://"):
        problems.append(
            Warning(
                f"OIDC_ISSUER {settings.OIDC_ISSUER!r} is not https: the provider's "
                "configuration, keys and tokens would travel unprotected.",
                hint="Use the provider's https:// issuer.",
                id="durable_runs.W002",
            )
        )
    return problems


@register()
def single_sign_on_settings(app_configs: Any = None, **kwargs: Any) -> list[Error]:
    """The single sign-on settings (docs/operating.md#single-sign-on), checked when any
    command starts (`migrate` included): a wrong one is said in one line naming the
    variable, before anyone tries to sign in."""
    problems: list[Error] = []

    def error(message: str, hint: str, number: int) -> None:
        problems.append(Error(message, hint=hint, id=f"durable_runs.E{number:03d}"))

    issuer = settings.OIDC_ISSUER
    if not issuer:
        for name in ("OIDC_CLIENT_ID", "OIDC_CLIENT_SECRET", "OIDC_ROLE_GROUPS"):
            if str(getattr(settings, name)).strip():
                error(
                    f"{name} is set but OIDC_ISSUER is not: single sign-on stays off.",
                    "Set OIDC_ISSUER to the provider's issuer URL, or unset " + name + ".",
                    10,
                )
        if not settings.LOCAL_LOGIN:
            error(
                "LOCAL_LOGIN=0 without single sign-on (OIDC_ISSUER): nobody could sign in "
                "to the pages.",
                "Set OIDC_ISSUER (and the other OIDC_ settings), or LOCAL_LOGIN=1.",
                11,
            )
        return problems
    if not issuer.startswith(("https://", "http://")):
        error(
            f"OIDC_ISSUER must be an https:// (or, to try, http://) URL, not {issuer!r}.",
            "The issuer as the provider's discovery document names it.",
            12,
        )
    for name in ("OIDC_CLIENT_ID", "OIDC_CLIENT_SECRET"):
        if not str(getattr(settings, name)).strip():
            error(
                f"OIDC_ISSUER is set but {name} is not.",
                "Register this service as a confidential client at the provider; its "
                "callback is https://<this host>/oidc/callback/.",
                13,
            )
    if "openid" not in settings.OIDC_SCOPES.split():
        error(
            f"OIDC_SCOPES must include openid, not {settings.OIDC_SCOPES!r}.",
            "The default is 'openid email profile groups'.",
            14,
        )
    try:
        mapping = parse_role_groups(settings.OIDC_ROLE_GROUPS)
    except ValueError as exc:
        error(
            f"OIDC_ROLE_GROUPS: {exc}.",
            "role=group pairs, comma-separated; roles: " + ", ".join(MAPPABLE) + ".",
            15,
        )
        return problems
    if not set(mapping) - {STAFF}:
        error(
            "OIDC_ROLE_GROUPS gives no role (operators, viewers or submitters): every "
            "sign-in would be refused.",
            "For example OIDC_ROLE_GROUPS=operators=ops-team,viewers=support.",
            16,
        )
    return problems
