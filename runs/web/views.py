"""The run pages' GET views (thin): the overview, the runs list, a run's page, the
submit form and the workers page. What they show is read by queries.py (workers.py for
the workers page)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.http import Http404, HttpResponse, QueryDict
from django.shortcuts import redirect, render
from django.utils import timezone
from django_htmx.http import HttpResponseClientRedirect

from runs import engine
from runs.errors import EngineError, InvalidDeadline, InvalidInput, RunNotFound
from runs.models import Run
from runs.pages.access import submitter_required, viewer_required
from runs.pages.http import SignedInRequest
from runs.pages.partials import is_partial, template_for
from runs.principals import Principal, user_principal
from runs.reads.summaries import parse_run_id
from runs.record import export
from runs.roles import can_submit
from runs.states import RUN_ACTIVE, RUN_FINISHED, RunStatus
from runs.workflows import registry

from . import forms, queries, timeline, workers


@viewer_required
def overview(request: SignedInRequest) -> HttpResponse:
    context = queries.overview()
    context["pauses"] = queries.pauses_in_effect()
    context["recent"] = list(
        Run.objects.defer("input", "result").order_by("-created_at", "-id")[:15]
    )
    queries.mark_paused(context["recent"], context["pauses"])
    return render(request, template_for(request, "runs/overview.html", "overview-live"), context)


@viewer_required
def worker_list(request: SignedInRequest) -> HttpResponse:
    """Workers, the attempts they run, waiting steps and queue depths; the live part
    polls itself (`workers-live`), a full page otherwise, so Back and a reload work."""
    template = template_for(request, "runs/workers.html", "workers-live")
    return render(request, template, {"page": workers.workers_page()})


@viewer_required
def run_list(request: SignedInRequest) -> HttpResponse:
    filters = queries.parse_filters(request.GET)
    runs = queries.runs_matching(filters)
    paginator = queries.CappedPaginator(
        runs, queries.RUNS_PER_PAGE, counted=queries.counted_from(filters)
    )
    page = paginator.get_page(request.GET.get("page"))
    for run in page.object_list:
        run.matched = filters.matched.get(run.id, "")  # type: ignore[attr-defined]
    queries.mark_paused(page.object_list)
    context = {
        "page": page,
        "runs": page.object_list,
        "filters": filters,
        "statuses": RunStatus.values,
        "workflows": queries.workflow_names(),
        "search_fields": registry.search_fields(),
        # What the search looked at: a workflow without search fields is found by its
        # run ids and keys only, which a search finding nothing does not say by itself.
        "search_scope": queries.search_scope(filters.q, filters.workflow),
        "can_submit": can_submit(request.user),
    }
    template = template_for(request, "runs/list.html", {"runs": "runs-results"})
    if is_partial(template):
        context["oob"] = True  # the Clear button and each filter's problem follow the filters
    return render(request, template, context, status=400 if filters.errors else 200)


@viewer_required
def run_detail(request: SignedInRequest, run_id: str) -> HttpResponse:
    """A run's page. htmx asks for parts of it by target: `run-view` (run-live and the
    event log: what the URL's parameters decide, asked for by the batches' toggles and
    the event filter, with every parameter in effect) and `run-live` (facts, timeline,
    steps, claims), which polls itself while the run is active and stops once it has
    finished. The answer to `run-live` is the `live-update` partial: run-live plus the
    header's status out of band, and, from the poll that sees the run finished, the
    final event log and the operations."""
    target = request.htmx.target if request.htmx else None
    live = target == "run-live"
    parts = {"run-live": queries.Parts.LIVE, "events": queries.Parts.EVENTS}
    try:
        data = queries.run_page(
            parse_run_id(run_id),
            parts=parts.get(target or "", queries.Parts.WHOLE),
            events_page=request.GET.get("page") or 1,
            event_type=request.GET.get("type", ""),
            expand=request.GET.getlist("expand"),
            collapse=request.GET.getlist("collapse"),
        )
    except (ValueError, Run.DoesNotExist) as exc:
        raise Http404(f"no run {run_id}") from exc
    template = template_for(
        request,
        "runs/detail.html",
        {"run-view": "run-view", "events": "events", "run-live": "live-update"},
    )
    toggles = []
    if data.timeline is not None:
        toggles = [(t, toggle_url(request.GET, t)) for t in data.timeline.toggles]
    return render(
        request,
        template,
        {
            "page": data,
            "run": data.run,
            "finished": data.run.status in RUN_FINISHED,
            # Still changing: an active run, or a cancelled one whose attempts that were
            # running have not finished yet. The page refreshes itself while it moves.
            "moving": data.run.status not in RUN_FINISHED or queries.has_live_attempt(data),
            "active_statuses": RUN_ACTIVE,
            "retry": queries.retry_offer(data),
            "awaited_signals": queries.awaited_signals(data, request.user),
            "timeline": data.timeline,
            "toggles": toggles,
            "event_type": request.GET.get("type", ""),
            # The event filter keeps the timeline's batches as they are.
            "keep": [(k, v) for k in ("expand", "collapse") for v in request.GET.getlist(k) if v],
            # The live refresh swaps the header's status (and, at the end, the event
            # log and the operations) out of band.
            "oob": live,
            # Only the poll of an active run's page (not a toggle of the batches) brings
            # the final event log when it sees the run finished.
            "polled": live and request.htmx.trigger == "run-live",
        },
    )


@viewer_required
def run_export(request: SignedInRequest, run_id: str) -> HttpResponse:
    """The run page's "Export (JSON)": the document GET /api/runs/{id}/export/ answers
    (runs/record/export.py), as a download, for viewers and operators."""
    try:
        doc = export.build(
            parse_run_id(run_id), exported_by=user_principal(request.user.get_username())
        )
    except (ValueError, RunNotFound) as exc:
        raise Http404(f"no run {run_id}") from exc
    response = HttpResponse(
        json.dumps(doc, indent=1, ensure_ascii=False), content_type="application/json"
    )
    response["Content-Disposition"] = f'attachment; filename="{export.filename(doc["run"]["id"])}"'
    return response


def toggle_url(query: QueryDict, toggle: timeline.Toggle) -> str:
    """The page's query string with one map step's batches shown (or hidden): its
    name in `expand` or `collapse` only where that differs from the default. Empty
    parameters are left out (they say nothing)."""
    params = QueryDict(mutable=True)
    for key, values in query.lists():
        if kept := [v for v in values if v]:
            params.setlist(key, kept)
    expand = [s for s in params.getlist("expand") if s != toggle.step]
    collapse = [s for s in params.getlist("collapse") if s != toggle.step]
    want_open = not toggle.expanded
    if want_open != (toggle.batches <= timeline.AUTO_EXPAND_BATCHES):
        (expand if want_open else collapse).append(toggle.step)
    params.setlist("expand", expand)
    params.setlist("collapse", collapse)
    encoded = params.urlencode()
    return f"?{encoded}" if encoded else "?"


@submitter_required
def new_run(request: SignedInRequest) -> HttpResponse:
    """Submit a run from a form generated from the workflow's input schema. Choosing
    another workflow swaps the fields (htmx); the workflow's own validation decides,
    its problems shown beside their fields, and a refused submission writes nothing."""
    data = request.POST if request.method == "POST" else request.GET
    known = registry.all_workflows()
    names = sorted({wf.name for wf in known})
    if not names:  # the page says so, and why (RUNS_WORKFLOW_MODULES), with no form
        return render(request, "runs/new.html", {"names": names}, status=200)
    chosen = data.get("workflow") or (names[0] if names else "")
    version_text = data.get("version", "")
    context: dict[str, object] = {"names": names, "chosen": chosen, "errors": []}
    try:
        version = int(version_text) if version_text else None
        wf = engine.resolve_workflow(chosen, version)
    except (ValueError, EngineError) as exc:
        context["errors"] = [str(exc) if not isinstance(exc, ValueError) else "bad version"]
        return render(request, "runs/new.html", context, status=400 if data else 200)
    fields = forms.fields_from_schema(wf.input_schema())
    context.update(wf=wf, versions=registry.versions(wf.name), fields=fields)
    if request.method == "POST":
        run_input = forms.parse(fields, request.POST)
        minutes = request.POST.get("deadline_minutes", "")
        context["deadline_minutes"] = minutes
        try:
            deadline = forms.deadline_from(minutes, timezone.now())
        except ValueError as exc:
            deadline, context["deadline_error"] = None, str(exc)
        if not any(f.errors for f in fields) and "deadline_error" not in context:
            try:
                run = engine.submit(
                    workflow=wf.name,
                    version=wf.version,
                    input=run_input,
                    by=Principal.of_user(request.user, "page"),
                    deadline=deadline,
                ).run
            except InvalidInput as exc:
                context["errors"] = forms.attach_problems(fields, exc.by_field, exc.problems)
            except InvalidDeadline as exc:
                context["deadline_error"] = str(exc)
            else:
                messages.success(request, f"Run submitted: {wf.name} v{wf.version}.")
                if request.htmx:
                    return HttpResponseClientRedirect(f"/runs/{run.id}/")
                return redirect("runs:detail", run_id=str(run.id))
        # A refused form is the page again with its problems (200, as Django forms do).
        return render(request, "runs/new.html", context)
    return render(request, template_for(request, "runs/new.html", "submit-fields"), context)
