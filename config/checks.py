"""Deployment checks of our own (`manage.py check --deploy`): settings that each look
fine alone but together leave a defence off."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Tags, Warning, register


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
    return problems
