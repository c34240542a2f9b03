"""Security headers the pages rely on.

Content-Security-Policy: scripts only from our own static files (no inline script, no
eval: htmx's trigger filters are not used, see static/app.js), no third-party origin at
all (htmx is vendored), no framing; forms post to this origin only, and, with single
sign-on, their redirects may go on to the provider (its logout).

Cache-Control: an answer to a signed-in user (a page, or the API with a session or a
token) is `no-store, private`: no browser history, shared computer or proxy keeps a
copy. Static files (served before any of this) and health checks are not concerned.

Vary: one URL answers a browser with the page and htmx with a part of it (the part its
HX-Target names; the run page's poll also reads HX-Trigger), so every HTML answer says
that it depends on those headers. Without it a cache that keeps answers (a browser's,
for Back and Forward; a proxy's; ours, should no-store ever be relaxed) may hand the
part to the browser as the page: no header, no styles, no scripts (django-htmx's
middleware docs, "Set the Vary header").
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse
from django.utils.cache import patch_cache_control, patch_vary_headers

from runs.web import sso

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
        response.headers.setdefault("Content-Security-Policy", policy())
        return response


def policy() -> str:
    """CSP, letting the Log out form's redirect reach the single sign-on provider's
    logout (Chromium holds a form's redirects to form-action too)."""
    origins = sso.form_action_origins()
    if not origins:
        return CSP
    return CSP.replace("form-action 'self'", " ".join(("form-action 'self'", *origins)))


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


# The request headers a page's view reads to choose what it renders.
HTMX_HEADERS = ("HX-Request", "HX-Target", "HX-Trigger")


class VaryOnHtmxMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if response.get("Content-Type", "").startswith("text/html"):
            patch_vary_headers(response, HTMX_HEADERS)
        return response
