"""The "Decide all N matching" page (thin; the rules are reconciliation/decisions.py's).

One address, the queue's filter in its query string (an incident group's "Decide
these…", or the filtered queue's "Decide all N matching…"):

- GET: what the filter matches, and the decision's form: the outcome (no default: a
  person says what happened), the note;
- GET with `preview` (that form, sent): the preview, read now, with Confirm right
  under its summary; the claims it sets aside and what deciding the others does
  follow. Nothing is written, so Back and Forward come back to it;
- POST (Confirm): the batch is made and the page goes to it (its progress, then its
  result, announced). A refusal is the page again, the problem beside its field.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_http_methods

from runs.pages.access import operator_required
from runs.pages.http import SignedInRequest

from . import decisions, wording
from .incidents import ClaimFilter
from .views import OUTCOMES


@require_http_methods(["GET", "POST"])
@operator_required
def decide(request: SignedInRequest) -> HttpResponse:
    errors: dict[str, str] = {}
    claim_filter = ClaimFilter.parse(request.GET, errors)
    sent = request.POST if request.method == "POST" else request.GET
    form = {k: sent.get(k, "") for k in ("outcome", "note", "as_of")}
    context: dict[str, Any] = {
        "filter": claim_filter,
        "form": form,
        "errors": errors,
        "outcomes": OUTCOMES,
        "matching": claim_filter.claims().count(),
    }
    if errors:
        return render(request, "reconciliation/decide.html", context, status=400)
    if request.method == "GET" and "preview" not in request.GET:
        return render(request, "reconciliation/decide.html", context)
    try:
        if request.method == "POST":
            batch = decisions.start(
                claim_filter=claim_filter,
                outcome=form["outcome"],
                note=form["note"],
                as_of=_as_of(form["as_of"]),
                user=request.user,
            )
            return redirect("runs:batch", batch_id=batch.id)
        decisions.check(form["outcome"], form["note"])
        preview = decisions.preview(
            claim_filter=claim_filter, outcome=form["outcome"], user=request.user
        )
        context["preview"] = preview
        context["matching"] = preview.matched  # one number on the page, the preview's
        context["set_aside"] = [
            {"claim_id": a.claim_id, "key": wording.short_key(a.claim_key), "message": a.message}
            for a in preview.set_aside
        ]
    except decisions.InvalidResolution as exc:
        errors[exc.field or "general"] = str(exc)
        return render(request, "reconciliation/decide.html", context, status=422)
    return render(request, "reconciliation/decide.html", context)


def _as_of(value: str) -> datetime:
    """The preview's reading time, sent back by its Confirm form."""
    moment = parse_datetime(value) if value else None
    if moment is None or moment.tzinfo is None:
        raise decisions.InvalidDecision(
            "this confirmation has no preview behind it: preview the decision first",
            field="general",
        )
    return moment


__all__ = ["decide"]
