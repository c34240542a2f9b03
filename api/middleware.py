"""Limits checked before any parser or database touches a request: the API's body, and
every request's query string (gunicorn leaves the request line unlimited,
config/gunicorn.py, so that an overlong one is refused here, in words the client reads)."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest

from .errors import INVALID, REQUEST_TOO_LARGE, error_response

# Longer than any URL the pages or a client build (the API's filters are a few short
# values); what gunicorn refused by default (4094 bytes for the whole request line).
MAX_QUERY_BYTES = 4096


class QueryLengthLimitMiddleware:
    """A query string over MAX_QUERY_BYTES gets 400 (the API's error shape under /api/),
    before Django parses it."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        length = len(request.META.get("QUERY_STRING", ""))
        if length > MAX_QUERY_BYTES:
            message = f"the query string is {length} bytes; at most {MAX_QUERY_BYTES} are accepted"
            if request.path_info.startswith("/api/"):
                return error_response(400, INVALID, message)
            return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
        return self.get_response(request)


class BodySizeLimitMiddleware:
    """An /api/ request whose declared body is over settings.API_MAX_BODY_BYTES gets 413
    in the error shape, unread. (A body without a Content-Length is not read at all by
    Django's WSGI handler, so the declared length is the one to check.)"""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if request.path_info.startswith("/api/"):
            limit = int(settings.API_MAX_BODY_BYTES)
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = 0
            if length > limit:
                return error_response(
                    413,
                    REQUEST_TOO_LARGE,
                    f"the request body is {length} bytes; at most {limit} are accepted",
                )
        return self.get_response(request)
