"""Run pages (thin): the overview, the runs list and a run's page."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render

from . import pages
from .models import Claim, Run
from .queries import parse_run_id
from .roles import viewer_required
from .states import RUN_FINISHED, ClaimStatus, RunStatus


@viewer_required
def overview(request: HttpRequest) -> HttpResponse:
    counts = dict(Run.objects.values_list("status").annotate(n=Count("id")).order_by())
    return render(
        request,
        "runs/overview.html",
        {
            "counts": [(status, counts.get(status, 0)) for status in RunStatus.values],
            "unresolved": Claim.objects.filter(status=ClaimStatus.UNRESOLVED).count(),
            "recent": Run.objects.order_by("-created_at")[:20],
        },
    )


@viewer_required
def run_list(request: HttpRequest) -> HttpResponse:
    runs = Run.objects.order_by("-created_at")
    status = request.GET.get("status", "")
    if status in RunStatus.values:
        runs = runs.filter(status=status)
    page = Paginator(runs, 50).get_page(request.GET.get("page"))
    return render(
        request,
        "runs/list.html",
        {"page": page, "runs": page.object_list, "status": status, "statuses": RunStatus.values},
    )


@viewer_required
def run_detail(request: HttpRequest, run_id: str) -> HttpResponse:
    try:
        data = pages.run_page(
            parse_run_id(run_id),
            events_page=int(request.GET.get("page") or 1),
            event_type=request.GET.get("type", ""),
        )
    except (ValueError, Run.DoesNotExist) as exc:
        raise Http404(f"no run {run_id}") from exc
    template = "runs/detail.html"
    if request.htmx and request.htmx.target == "events":
        template += "#events"
    return render(
        request,
        template,
        {"page": data, "run": data.run, "finished": data.run.status in RUN_FINISHED},
    )
