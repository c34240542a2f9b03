"""The API's body limit, checked before any parser or database touches the request."""

from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from .errors import REQUEST_TOO_LARGE, error_response


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
