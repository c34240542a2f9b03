"""Security headers the pages rely on.

Content-Security-Policy: scripts only from our own static files (no inline script, no
eval: htmx's trigger filters are not used, see static/app.js), no third-party origin at
all (htmx is vendored), no framing.

Cache-Control: an answer to a signed-in user (a page, or the API with a session or a
token) is `no-store, private`: no browser history, shared computer or proxy keeps a
copy. Static files (served before any of this) and health checks are not concerned.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control

CSP = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # The API's interactive docs bring their own policy needs; everything else
        # gets the strict one.
        response.headers.setdefault("Content-Security-Policy", CSP)
        return response


class PrivateResponsesMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        # Read after the view: DRF authenticates a token inside it, and sets the user
        # on this request too.
        user = getattr(request, "user", None)
        if user is not None and user.is_authenticated:
            patch_cache_control(response, no_store=True, private=True)
        return response
