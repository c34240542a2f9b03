"""Each web request gets a request id (the client's X-Request-ID when it is a sane
token, so a proxy's id follows the request; else a new one), echoed in the response;
every log line written while serving it carries the id and the user, and one access
line per request is logged with method, path, status and duration."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from runs.ops.logcontext import bind, log_context

log = logging.getLogger("durable_runs.request")
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,100}")
QUIET = ("/healthz", "/readyz", "/metrics", "/static/")


class RequestContextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        given = request.headers.get("X-Request-ID", "")
        request_id = given if REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        began = time.monotonic()
        with log_context(request_id=request_id):
            user = getattr(request, "user", None)
            if user is not None and user.is_authenticated:
                bind(user=user.get_username())
            response = self.get_response(request)
            response["X-Request-ID"] = request_id
            # A user authenticated inside the view (an API token) is named too.
            user = getattr(request, "user", None)
            if user is not None and user.is_authenticated:
                bind(user=user.get_username())
            if not request.path.startswith(QUIET) or response.status_code >= 500:
                log.info(
                    "%s %s %s",
                    request.method,
                    request.path,
                    response.status_code,
                    extra={"status": response.status_code, "ms": _ms(began)},
                )
        return response


def _ms(began: float) -> float:
    return round((time.monotonic() - began) * 1000, 1)
