"""Run pages (thin). The full dashboard comes with the operator-pages issue."""

from django.contrib.auth.decorators import login_required
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from .models import Claim, Run
from .states import ClaimStatus


@login_required
def overview(request: HttpRequest) -> HttpResponse:
    counts = dict(Run.objects.values_list("status").annotate(n=Count("id")).order_by())
    return render(
        request,
        "runs/overview.html",
        {
            "counts": counts,
            "unresolved": Claim.objects.filter(status=ClaimStatus.UNRESOLVED).count(),
            "recent": Run.objects.order_by("-created_at")[:20],
        },
    )
