"""Throttles per user and per anonymous address, counted in the cache every process
shares (settings.CACHES: a Redis, or a table in PostgreSQL).

Addresses are the client's, behind settings.TRUSTED_PROXY_COUNT proxies
(config/clientip.py). The rates are read from settings.API_THROTTLE_USER /
API_THROTTLE_ANON at each request (DRF binds its rates when the class is defined, so a
changed setting would go unseen).
A throttle protects the service; it is not a rule of the domain: if its cache cannot be
reached the request goes through (logged), rather than every request failing.
"""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings
from django.db import DatabaseError
from redis.exceptions import RedisError
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle

from config.clientip import client_ip

log = logging.getLogger(__name__)


class _FromSettings:
    setting = ""

    def get_rate(self) -> str:
        return str(getattr(settings, self.setting))

    def get_ident(self, request: Any) -> str:
        # The address login throttling counts too (settings.TRUSTED_PROXY_COUNT).
        return client_ip(request)

    def allow_request(self, request: Any, view: Any) -> bool:
        try:
            return bool(super().allow_request(request, view))  # type: ignore[misc]
        except (RedisError, OSError, DatabaseError) as exc:
            log.warning("API throttle skipped: its cache is unavailable (%s)", exc)
            return True


class UserThrottle(_FromSettings, UserRateThrottle):
    """Per authenticated user (per address for anonymous callers)."""

    setting = "API_THROTTLE_USER"


class AnonThrottle(_FromSettings, AnonRateThrottle):
    """Per address, for anonymous callers and failed authentications."""

    setting = "API_THROTTLE_ANON"
