"""The operator pages (thin): parse the request, call one service or query, render.

Every claim in the queue is its own `<tbody id="claim-N">`: the row, and its detail row
once expanded. Actions answer with the new state of that tbody (or with nothing, when
the claim left the queue), plus out-of-band updates of the messages (into the live
region), the badge and the heading's count. On a claim's own page the same actions
answer with that page's content, whose heading says the claim's status. Each answer
says where the keyboard focus goes next (see FOCUS_*).
"""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect, reswap, retarget

from runs import userinput
from runs.models import Claim
from runs.pages.access import operator_required, viewer_required
from runs.pages.http import SignedInRequest
from runs.pages.partials import is_partial, template_for
from runs.states import ClaimStatus

from . import queries, services, wording
from .incidents import AGES, ClaimFilter, incidents

PAGE_SIZE = 200
HISTORY_PAGE_SIZE = 50
# How many incident groups the queue shows before "and N more" (the overview shows
# fewer: incidents.OVERVIEW_GROUPS).
QUEUE_GROUPS = 12
OUTCOMES = [
    (ClaimStatus.SUCCEEDED, "succeeded: the effect happened"),
    (ClaimStatus.FAILED, "failed: the effect did NOT happen"),
]


# Where the keyboard focus goes after an htmx answer (the element rendered with
# `autofocus`, which htmx focuses once the swap settles): the region that opened, the
# field in error, the claim as decided, the control that replaced the one used, or the
# message that says what happened.
FOCUS_DETAIL = "detail"
FOCUS_DETAILS_LINK = "details-link"
FOCUS_ERROR = "error"
FOCUS_DECIDED = "decided"
FOCUS_TAKE = "take"
FOCUS_MESSAGE = "message"


def _oob(request: SignedInRequest, response: HttpResponse, **context: Any) -> HttpResponse:
    """Append, out of band, the messages (into the live region, which stays), the badge
    and, on the queue, the heading's count for the filters the page shows."""
    if "count" not in context:
        context["count"] = _count_on_current_queue(request)
    extra = render(request, "reconciliation/oob.html", context).content
    response.content = response.content + extra
    return response


def _unresolved(claim_filter: ClaimFilter) -> queries.Rows[queries.QueueRow]:
    return queries.unresolved_queue(claim_filter.claims())


def _count(shown: int, claim_filter: ClaimFilter) -> dict[str, Any]:
    """The heading's count: the claims the table lists, and whether filters narrow it
    (then it says "N of M", M being the badge's count)."""
    return {"shown": shown, "filtered": bool(claim_filter)}


def _shown_rows(request: SignedInRequest) -> list[queries.QueueRow]:
    """The claims the page's table shows (the poll sends their ids as `shown`) that are
    still unresolved: each brings its "on it" cell, out of band, to a row that is there.
    Ids that are not numbers are ignored; at most a page's worth is read."""
    ids = [i for i in map(_claim_id, request.GET.getlist("shown")[:PAGE_SIZE]) if i]
    if not ids:
        return []
    return list(queries.unresolved_queue(Claim.objects.filter(pk__in=ids)))


def _count_on_current_queue(request: SignedInRequest) -> dict[str, Any] | None:
    """The heading's count again, when an htmx request comes from the queue page (its
    address, in HX-Current-URL, carries the filters it shows); None elsewhere."""
    current = urlsplit(request.htmx.current_url_abs_path or "") if request.htmx else None
    if current is None or current.path != reverse("reconciliation:queue"):
        return None
    claim_filter = ClaimFilter.parse(QueryDict(current.query), {})
    return _count(_unresolved(claim_filter).count(), claim_filter)


def _on_claim_page(request: SignedInRequest, claim_id: int) -> bool:
    """Whether an htmx request comes from the claim's own page (claim.html), which then
    answers with that page's content (its heading says the claim's status)."""
    if not request.htmx:
        return False
    current = urlsplit(request.htmx.current_url_abs_path or "")
    return current.path == reverse("reconciliation:claim", args=[claim_id])


# --- reading -------------------------------------------------------------------------
@viewer_required
def badge(request: SignedInRequest) -> HttpResponse:
    """The navigation's queue-size badge, polled by htmx on every page."""
    return render(request, "base.html#queue-badge")


@viewer_required
def queue(request: SignedInRequest) -> HttpResponse:
    errors: dict[str, str] = {}
    claim_filter = ClaimFilter.parse(request.GET, errors)
    status = 400 if errors else 200
    groups = {"filter": claim_filter, "incidents": incidents(QUEUE_GROUPS, claim_filter.claims())}
    if request.htmx and request.htmx.target == "incident-groups":
        # The groups' poll, every 10 s from each open queue: the groups, who is on each
        # claim the table shows (`shown`) and the heading's count; not the table's page
        # nor the filter's lists, which it does not redraw.
        context = {**groups, "shown_rows": _shown_rows(request)}
        template = "reconciliation/queue.html#incident-groups"
        count = _count(_unresolved(claim_filter).count(), claim_filter)
        return _oob(request, render(request, template, context, status=status), count=count)
    page = Paginator(_unresolved(claim_filter), PAGE_SIZE).get_page(request.GET.get("page"))
    expand = _claim_id(request.GET.get("claim"))
    shown = list(page.object_list)
    if expand and not request.htmx and all(row.claim_id != expand for row in shown):
        # A link to a claim that is not on this page (or no longer unresolved) opens
        # the claim's own page rather than a page with nothing expanded.
        return redirect("reconciliation:claim", claim_id=expand)
    count = _count(page.paginator.count, claim_filter)
    in_queue = queries.workflows_in_queue(claim_filter.workflow)
    context = {
        **groups,
        "page": page,
        "rows": shown,
        "count": count,
        "workflows": in_queue,
        "pauses": queries.pauses_in_queue(in_queue),
        "workflow": claim_filter.workflow,
        "age": claim_filter.age,
        "ages": [(key, label) for key, (label, _) in AGES.items()],
        "expand": queries.claim_detail(expand) if expand else None,
        "stale_minutes": settings.RECONCILIATION_STALE_MINUTES,
        "filter_errors": errors,
    }
    # A filter (the groups and the table), or a table whose rows were all decided
    # fetching the next ones; with the heading's count for what it lists.
    template = template_for(
        request, "reconciliation/queue.html", {"queue": "queue-table", "queue-rows": "queue-rows"}
    )
    if is_partial(template):
        context["oob"] = request.htmx.target == "queue"  # each filter's problem, or none
        response = render(request, template, context, status=status)
        return _oob(request, response, count=count)
    return render(request, template, context, status=status)


@viewer_required
def claim(request: SignedInRequest, claim_id: int) -> HttpResponse:
    """One claim with everything needed to decide it: the detail row (htmx), or a page
    of its own (a link from a run page)."""
    detail = queries.claim_detail(claim_id)
    if detail is None:
        raise Http404(f"no claim {claim_id}")
    if request.htmx and not _on_claim_page(request, claim_id):
        if request.GET.get("collapse"):
            context = _detail_context(detail, expanded=False, focus=FOCUS_DETAILS_LINK)
            return render(request, "reconciliation/queue.html#claim-body", context)
        return render(
            request,
            "reconciliation/queue.html#claim-body",
            _detail_context(detail, expanded=True, focus=FOCUS_DETAIL),
        )
    return render(request, "reconciliation/claim.html", _detail_context(detail, own_page=True))


def _detail_context(detail: queries.ClaimDetail, **extra: Any) -> dict[str, Any]:
    return {"detail": detail, "row": detail.row, "outcomes": OUTCOMES, **extra}


def _show(
    request: SignedInRequest,
    claim_id: int,
    *,
    status: int = 200,
    focus: str | None = None,
) -> HttpResponse:
    """The claim as it is now, where the request came from, with the messages, the badge
    and the queue's count out of band:

    - on the queue, its tbody (row and detail), or nothing if it was resolved by this
      request's own decision (then its tbody is removed and focus goes to the message);
    - on its own page, that page's content: the heading says its status.
    Without htmx, back to the queue."""
    if not request.htmx:
        return redirect("reconciliation:queue")
    detail = queries.claim_detail(claim_id)
    if _on_claim_page(request, claim_id):
        if detail is None:
            return HttpResponseClientRedirect(reverse("reconciliation:queue"))
        if focus == FOCUS_MESSAGE and detail.row.status != ClaimStatus.UNRESOLVED:
            focus = FOCUS_DECIDED  # the notice under the heading says what happened
        context = _detail_context(detail, own_page=True, focus=focus)
        response = render(request, "reconciliation/claim.html#claim-page", context, status=status)
        response = reswap(retarget(response, "#claim-page"), "outerHTML")
        return _oob(request, response, focus=focus)
    if detail is None or (focus == FOCUS_MESSAGE and detail.row.status != ClaimStatus.UNRESOLVED):
        response = reswap(retarget(HttpResponse("", status=status), f"#claim-{claim_id}"), "delete")
        return _oob(request, response, focus=FOCUS_MESSAGE)
    context = _detail_context(detail, expanded=True, focus=focus)
    response = render(request, "reconciliation/queue.html#claim-body", context, status=status)
    response = reswap(retarget(response, f"#claim-{claim_id}"), "outerHTML")
    return _oob(request, response, focus=focus)


@viewer_required
def history(request: SignedInRequest) -> HttpResponse:
    errors: dict[str, str] = {}
    outcome = _text(request.GET.get("outcome"), "outcome", "the outcome", errors)
    if outcome and outcome not in ClaimStatus.values:
        errors["outcome"] = f"unknown outcome {outcome!r}"
        outcome = ""
    operator = _text(request.GET.get("operator"), "operator", "the operator", errors)
    workflow = _text(request.GET.get("workflow"), "workflow", "the workflow", errors)
    since = _date(request.GET.get("since"), "since", errors)
    until = _date(request.GET.get("until"), "until", errors)
    rows = queries.resolution_history(
        operator=operator or None,
        outcome=outcome or None,
        workflow=workflow or None,
        since=since,
        until=until + timedelta(days=1) if until else None,  # "until" is a whole day
    )
    page = Paginator(rows, HISTORY_PAGE_SIZE).get_page(request.GET.get("page"))
    context: dict[str, Any] = {
        "page": page,
        "rows": list(page.object_list),
        "operators": queries.history_operators(),
        "workflows": queries.history_workflows(),
        "filters": request.GET,
        "errors": errors,
    }
    template = template_for(request, "reconciliation/history.html", {"history": "history-table"})
    if is_partial(template):
        context["oob"] = True  # each filter's problem (or none), beside its field
    return render(request, template, context, status=400 if errors else 200)


# --- deciding ------------------------------------------------------------------------
@require_POST
@operator_required
def resolve(request: SignedInRequest, claim_id: int) -> HttpResponse:
    form = {
        "outcome": request.POST.get("outcome", ""),
        "note": request.POST.get("note", ""),
        "result": request.POST.get("result", ""),
        "reference": request.POST.get("reference", ""),
    }
    try:
        resolution = services.resolve(
            claim_id=claim_id,
            user=request.user,
            outcome=form["outcome"],
            note=form["note"],
            result_json=form["result"],
            reference=form["reference"],
        )
    except services.InvalidResolution as exc:
        # The form again, with what was typed, the message by its field, focus there.
        detail = _detail_or_404(claim_id)
        errors = {exc.field or "general": str(exc)}
        context = _detail_context(detail, form=form, errors=errors, focus=FOCUS_ERROR)
        return render(request, "reconciliation/queue.html#resolve-form", context, status=422)
    except services.ClaimNotFound as exc:
        raise Http404(str(exc)) from exc
    except services.ResolutionError as exc:  # decided first by someone else, or the probe
        messages.warning(request, wording.refusal(exc))
        return _show(request, claim_id, status=409, focus=FOCUS_DECIDED)
    claim = resolution.claim
    messages.success(
        request,
        format_html(
            '{} resolved as <strong>{}</strong>{}. <a href="{}">Run {}</a> is now {}.',
            wording.capfirst(wording.label_of(claim)),
            claim.status,
            " (your first submit had already counted)" if resolution.replayed else "",
            reverse("runs:detail", args=[claim.run_id]),
            str(claim.run_id)[:8],
            resolution.run_status.replace("_", " "),
        ),
    )
    return _show(request, claim_id, focus=FOCUS_MESSAGE)


def _detail_or_404(claim_id: int) -> queries.ClaimDetail:
    detail = queries.claim_detail(claim_id)
    if detail is None:
        raise Http404(f"no claim {claim_id}")
    return detail


@require_POST
@operator_required
def take(request: SignedInRequest, claim_id: int) -> HttpResponse:
    detail = _detail_or_404(claim_id)
    label = wording.claim_label(detail.row.key, detail.row.step)
    try:
        taken = services.take_claim(claim_id=claim_id, user=request.user)
        messages.success(
            request,
            f"You are on {label} until {wording.clock(taken.expires_at)}; others see it as taken.",
        )
    except services.ClaimTakenByOther as exc:
        messages.warning(request, wording.taken_by_other(exc, label))
    except services.ClaimNotFound as exc:
        raise Http404(str(exc)) from exc
    except services.ResolutionError as exc:
        messages.warning(request, wording.refusal(exc))
        return _show(request, claim_id, status=409, focus=FOCUS_DECIDED)
    return _show(request, claim_id, focus=FOCUS_TAKE)


@require_POST
@operator_required
def release(request: SignedInRequest, claim_id: int) -> HttpResponse:
    detail = _detail_or_404(claim_id)
    label = wording.claim_label(detail.row.key, detail.row.step)
    try:
        if services.release_claim(claim_id=claim_id, user=request.user):
            messages.success(request, f"You released {label}.")
    except services.ClaimTakenByOther as exc:
        messages.warning(request, wording.taken_by_other(exc, label))
    except services.ClaimNotFound as exc:
        raise Http404(str(exc)) from exc
    return _show(request, claim_id, focus=FOCUS_TAKE)


@require_POST
@operator_required
def check_again(request: SignedInRequest, claim_id: int) -> HttpResponse:
    try:
        outcome = services.reprobe(claim_id=claim_id, user=request.user)
    except services.ClaimNotFound as exc:
        raise Http404(str(exc)) from exc
    except (services.ProbeError, services.ResolutionError) as exc:
        messages.warning(request, wording.refusal(exc))
        return _show(request, claim_id, focus=FOCUS_MESSAGE)
    summary = wording.capfirst(outcome.summary)
    if outcome.resolution is not None:
        messages.success(request, f"{summary}.")
    else:
        messages.info(request, f"{summary}.")
    return _show(request, claim_id, focus=FOCUS_MESSAGE)


# --- helpers -------------------------------------------------------------------------
def _claim_id(value: str | None) -> int | None:
    """A claim id from the query string: a positive integer a claim's primary key (a
    bigint) can hold, else None (the claim's URL takes only such numbers)."""
    if not value or not value.isascii() or not value.isdigit():
        return None
    number = int(value)
    return number if 0 < number < 2**63 else None


def _text(value: str | None, field: str, what: str, errors: dict[str, str]) -> str:
    """A filter's text; a bad one is reported next to its field (and ignored)."""
    try:
        return userinput.clean_text(value, what)
    except userinput.BadInput as exc:
        errors[field] = str(exc)
        return ""


def _date(value: str | None, field: str, errors: dict[str, str]) -> datetime | None:
    """A YYYY-MM-DD filter as the start of that day; a bad one is reported next to its
    field (and ignored)."""
    try:
        day = userinput.parse_day(value, f"the day {field!r}")
    except userinput.BadInput as exc:
        errors[field] = str(exc)
        return None
    return None if day is None else timezone.make_aware(datetime.combine(day, time.min))


__all__ = [
    "badge",
    "check_again",
    "claim",
    "history",
    "queue",
    "release",
    "resolve",
    "take",
]
