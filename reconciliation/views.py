"""The operator pages (thin): parse, call one service or query, render."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from runs.roles import viewer_required


@viewer_required
def badge(request: HttpRequest) -> HttpResponse:
    """The navigation's queue-size badge, polled by htmx on every page."""
    return render(request, "base.html#queue-badge")


@viewer_required
def queue(request: HttpRequest) -> HttpResponse:
    return render(request, "reconciliation/queue.html", {})
