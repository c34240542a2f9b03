"""Health endpoints for load balancers and orchestrators (no login, JSON).

/healthz: the process answers (nothing else is checked: a liveness probe must not
restart the web tier because PostgreSQL is down). /readyz: PostgreSQL reachable and
every migration applied, and the broker reachable; 503 naming what is not. Anyone gets
whether each check passed; only an operator (or staff) or a caller with the metrics
token gets why one failed, since the error names hosts, ports and database roles; the
log always has it. `manage.py check_health` runs the same checks for containers that
serve no HTTP (workers, beat).

/metrics: for the metrics token, or for an address in METRICS_ALLOWED_NETWORKS when no
proxy is in front. Behind a proxy (TRUSTED_PROXY_COUNT > 0, or a request that carries
forwarding headers) every request comes from the proxy's address, often this host's, so
only the token is accepted."""

from __future__ import annotations

import hmac
import ipaddress
import logging
import time
from collections.abc import Callable
from functools import cache
from typing import Any

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from runs.roles import can_operate

log = logging.getLogger(__name__)
# Headers a reverse proxy adds: a request carrying one came through a proxy, whatever
# its REMOTE_ADDR.
FORWARDING_HEADERS = (
    "HTTP_X_FORWARDED_FOR",
    "HTTP_FORWARDED",
    "HTTP_X_REAL_IP",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_FORWARDED_PROTO",
)


@cache
def _migrations_on_disk() -> frozenset[tuple[str, str]]:
    """The migrations this code ships (read once per process)."""
    from django.db.migrations.loader import MigrationLoader

    return frozenset(MigrationLoader(None, ignore_no_migrations=True).disk_migrations)


def check_database() -> dict[str, Any]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT to_regclass('django_migrations') IS NOT NULL")
        if not cursor.fetchone()[0]:
            return {"ok": False, "error": "no migration applied: run `manage.py migrate`"}
        cursor.execute("SELECT app, name FROM django_migrations")
        applied = set(cursor.fetchall())
    missing = sorted(_migrations_on_disk() - applied)
    if missing:
        shown = ", ".join(f"{app}.{name}" for app, name in missing[:5])
        return {"ok": False, "error": f"{len(missing)} migration(s) not applied: {shown}"}
    return {"ok": True}


def check_broker() -> dict[str, Any]:
    from kombu.connection import Connection

    # A fresh connection, not one from the pool: the question is whether the broker
    # answers now.
    timeout = settings.RUNS_HEALTH_TIMEOUT_SECONDS
    with Connection(settings.CELERY_BROKER_URL, connect_timeout=timeout) as conn:
        conn.ensure_connection(max_retries=1, interval_start=0, timeout=timeout)
    return {"ok": True}


CHECKS: dict[str, Callable[[], dict[str, Any]]] = {
    "database": check_database,
    "broker": check_broker,
}


def run_checks() -> tuple[bool, dict[str, Any]]:
    results: dict[str, Any] = {}
    for name, check in CHECKS.items():
        began = time.monotonic()
        try:
            result = check()
        except Exception as exc:
            result = {"ok": False, "error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"}
            if name == "database":
                connection.close_if_unusable_or_obsolete()
        result["ms"] = round((time.monotonic() - began) * 1000, 1)
        results[name] = result
    return all(r["ok"] for r in results.values()), results


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    ready, checks = run_checks()
    for name, result in checks.items():
        if not result["ok"]:
            log.warning("not ready: %s: %s", name, result.get("error", ""), extra={"check": name})
    if not _may_see_details(request):
        checks = {name: {"ok": result["ok"]} for name, result in checks.items()}
    return JsonResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        status=200 if ready else 503,
    )


def _has_metrics_token(request: HttpRequest) -> bool:
    token = settings.METRICS_TOKEN
    given = request.headers.get("Authorization", "")
    return bool(token) and hmac.compare_digest(given.encode(), f"Bearer {token}".encode())


def _may_see_details(request: HttpRequest) -> bool:
    if _has_metrics_token(request):
        return True
    user = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and (user.is_staff or can_operate(user)))


def _metrics_allowed(request: HttpRequest) -> bool:
    if _has_metrics_token(request):
        return True
    if settings.TRUSTED_PROXY_COUNT > 0 or any(h in request.META for h in FORWARDING_HEADERS):
        return False
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:
        return False
    return any(
        address in ipaddress.ip_network(net, strict=False)
        for net in settings.METRICS_ALLOWED_NETWORKS
    )


@never_cache
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """Prometheus text format: this web process's counters (all of its siblings' in
    multiprocess mode) and the gauges read from the database."""
    from prometheus_client import CONTENT_TYPE_LATEST

    from runs.ops.metrics import exposition

    if not _metrics_allowed(request):
        return HttpResponse(
            "metrics: send Authorization: Bearer <METRICS_TOKEN>, or scrape from "
            "METRICS_ALLOWED_NETWORKS without a proxy in between (behind a proxy, "
            "TRUSTED_PROXY_COUNT > 0, only the token is accepted)\n",
            status=403,
            content_type="text/plain",
        )
    return HttpResponse(exposition(with_database=True), content_type=CONTENT_TYPE_LATEST)
