"""The OpenAPI schema at /api/schema/, and interactive API docs at /api/docs/.

The docs are Swagger UI from drf-spectacular-sidecar's static files (no CDN), its
start-up script served as a file of its own (the "split" view), and its page's few style
rules in static/api/docs.css (templates/drf_spectacular/): so the site's strict
Content-Security-Policy (config/security.py: script-src 'self', no inline script or
style) holds on this page too, with no exception for it.

People reach it with their browser session; someone not logged in is sent to /login/.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import redirect_to_login
from drf_spectacular.renderers import OpenApiJsonRenderer, OpenApiYamlRenderer
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from rest_framework import exceptions
from rest_framework.renderers import JSONRenderer


class SchemaView(SpectacularAPIView):
    """The OpenAPI 3 schema: JSON by default (`?format=yaml` or an Accept of
    application/vnd.oai.openapi for YAML); a refusal is JSON in the error shape."""

    renderer_classes = [OpenApiJsonRenderer, OpenApiYamlRenderer]

    def handle_exception(self, exc: Exception) -> Any:
        response = super().handle_exception(exc)
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return response


class DocsView(SpectacularSwaggerSplitView):
    title = "durable-runs API"

    def handle_exception(self, exc: Exception) -> Any:
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            return redirect_to_login(self.request.get_full_path())
        return super().handle_exception(exc)
