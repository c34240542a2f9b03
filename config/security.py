"""Security headers the pages rely on.

Content-Security-Policy: scripts only from our own static files (no inline script, no
eval: htmx's trigger filters are not used, see static/app.js), no third-party origin at
all (htmx is vendored), no framing.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

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
