"""The client's address, as every defence that counts per address sees it (login
throttling, the API's anonymous throttle).

Behind TRUSTED_PROXY_COUNT reverse proxies, each appends the address it received the
request from to X-Forwarded-For, so the client's address is that many entries from the
right; whatever the client wrote further left is its own and never trusted. With no
proxy configured the header is ignored: anyone could write it.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from django.conf import settings

log = logging.getLogger(__name__)
_warned_unconfigured = False


def client_ip(request: Any) -> str:
    """The address a request came from (a Django or a DRF request)."""
    remote = str(request.META.get("REMOTE_ADDR") or "")
    forwarded = request.META.get("HTTP_X_FORWARDED_FOR")
    count = int(getattr(settings, "TRUSTED_PROXY_COUNT", 0))
    if count <= 0:
        if forwarded:
            _warn_unconfigured(remote)
        return remote
    if not forwarded:
        # Straight from inside the network (a probe, a scraper): no proxy in between.
        return remote
    hops = [hop.strip() for hop in forwarded.split(",")]
    candidate = hops[-min(count, len(hops))]
    try:
        return str(ipaddress.ip_address(candidate))
    except ValueError:
        # Only a misbehaving proxy writes this: count it against the proxy, not nobody.
        return remote


def _warn_unconfigured(remote: str) -> None:
    global _warned_unconfigured
    if not _warned_unconfigured:
        _warned_unconfigured = True
        log.warning(
            "X-Forwarded-For received from %s but TRUSTED_PROXY_COUNT is 0: if a proxy "
            "is in front, every client has its address (login and API throttles count "
            "them as one); set TRUSTED_PROXY_COUNT to the number of proxies",
            remote,
        )
