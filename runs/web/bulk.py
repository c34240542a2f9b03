"""The bulk operation pages (docs/operating.md#bulk-operations), thin: the preview of
a batch from a runs-list filter with its confirmation form, and a batch's page (its
progress while it runs, then every item it applied or refused). The
batch itself is runs/batches/service.py's. Operators act (the preview and its
confirmation); viewers read every batch's page as they read every other page."""

from __future__ import annotations

from typing import Any

from django.core.paginator import Paginator
from django.db.models import Count
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.views.decorators.http import require_http_methods

from runs.batches import selection, service
from runs.errors import InvalidBatch
from runs.models import Batch, BatchItem
from runs.pages.access import operator_required, viewer_required
from runs.pages.http import SignedInRequest
from runs.pages.partials import template_for
from runs.states import BATCH_ACTIVE, BatchItemStatus, BatchOperation, BatchStatus

from .workers import batch_wait

ITEMS_PER_PAGE = 50


@require_http_methods(["GET", "POST"])
@operator_required
def preview(request: SignedInRequest) -> HttpResponse:
    """GET: what the batch would do (writes nothing). POST: confirm it, with a reason;
    a refusal is the preview again with the problem beside its field."""
    params = request.GET
    operation = params.get("operation", "")
    context: dict[str, object] = {
        "operation": operation,
        "title": selection.OPERATIONS.get(operation, "Bulk operation"),  # type: ignore[call-overload]
        "filter": selection.normalized(params),
        "reason": "",
        "errors": {},
        "max_runs": selection.MAX_RUNS,
    }
    status = 200
    if request.method == "POST":
        context["reason"] = request.POST.get("reason", "")
        try:
            batch = service.create_batch(
                operation=operation,
                params=params,
                actor=request.user,
                reason=request.POST.get("reason", ""),
            )
        except InvalidBatch as exc:
            context["errors"] = {exc.field: str(exc)}
            status = 422
        else:
            return redirect("runs:batch", batch_id=batch.id)
    try:
        context["preview"] = selection.preview(operation, params)
    except InvalidBatch as exc:
        context["errors"] = {**{exc.field: str(exc)}, **context["errors"]}  # type: ignore[dict-item]
        context["preview"] = None
        status = 400
    return render(request, "runs/bulk.html", context, status=status)


@viewer_required
def batch_detail(request: SignedInRequest, batch_id: int) -> HttpResponse:
    """A batch's page. While the batch runs, its progress polls itself every second
    (htmx target `batch-live`); the copy rendered once it is done carries no trigger.
    While no worker has taken it up (pending), it says why it waits."""
    batch = Batch.objects.filter(pk=batch_id).first()
    if batch is None:
        raise Http404(f"no batch {batch_id}")
    shown = request.GET.get("status", "")
    items = (
        BatchItem.objects.filter(batch=batch)
        .select_related("run", "claim")
        .defer("run__input", "run__result", "claim__result", "claim__evidence")
        .order_by("id")
    )
    if shown in BatchItemStatus.values:
        items = items.filter(status=shown)
    else:
        shown = ""
    running = batch.status in BATCH_ACTIVE
    page = Paginator(items.exclude(status=BatchItemStatus.PENDING), ITEMS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    list_query = QueryDict(batch.filter)
    resolving = batch.operation == BatchOperation.RESOLVE
    return render(
        request,
        template_for(request, "runs/batch.html", "batch-live"),
        {
            "batch": batch,
            "running": running,
            "wait": batch_wait() if batch.status == BatchStatus.PENDING else None,
            "page": page,
            "items": page.object_list,
            "shown": shown,
            "statuses": _statuses(batch),
            "list_url": f"?{list_query.urlencode()}" if batch.filter else "",
            "resolving": resolving,
            # A decision over claims is the queue's: its link is the current one.
            **({"nav_here": "reconciliation"} if resolving else {}),
            "what": "claims" if resolving else "runs",
            "title": _title(batch),
            # What happened, said once per distinct message: 157 claims "already
            # resolved as failed by bob" are one line, not 157.
            "said": _said(batch) if not running else [],
            "done_now": request.htmx and not running,
        },
    )


def _title(batch: Batch) -> str:
    if batch.operation == BatchOperation.RESOLVE:
        return f"Resolve matching claims as {batch.outcome}"
    return str(selection.OPERATIONS.get(batch.operation, batch.operation))  # type: ignore[call-overload]


def _statuses(batch: Batch) -> list[str]:
    """The item statuses its results page filters by: set aside only where it can be."""
    shown = [s for s in BatchItemStatus.values if s != BatchItemStatus.PENDING]
    if batch.operation != BatchOperation.RESOLVE:
        shown.remove(BatchItemStatus.SET_ASIDE)
    return shown


SAID_LINES = 8


def _said(batch: Batch) -> list[dict[str, Any]]:
    """The batch's outcomes by (status, message), the most frequent first: one GROUP BY
    over its items (batchitem_status_idx)."""
    rows = (
        BatchItem.objects.filter(batch=batch)
        .exclude(status=BatchItemStatus.PENDING)
        .values("status", "message")
        .annotate(n=Count("id"))
        .order_by("-n", "status", "message")[:SAID_LINES]
    )
    return [dict(row) for row in rows]
