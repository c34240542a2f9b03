"""Run pages (thin): the overview, the runs list and a run's page."""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django_htmx.http import HttpResponseClientRedirect

from . import browse, engine, pages, submitform
from .models import Run
from .queries import parse_run_id
from .roles import can_submit, submitter_required, viewer_required
from .states import RUN_ACTIVE, RUN_FINISHED, AttemptStatus, RunStatus, StepStatus
from .workflows import registry


@viewer_required
def overview(request: HttpRequest) -> HttpResponse:
    context = browse.overview()
    context["recent"] = Run.objects.defer("input", "result").order_by("-created_at", "-id")[:15]
    template = "runs/overview.html"
    if request.htmx and request.htmx.target == "overview-live":
        template += "#overview-live"
    return render(request, template, context)


@viewer_required
def run_list(request: HttpRequest) -> HttpResponse:
    filters = browse.parse_filters(request.GET)
    page = browse.CappedPaginator(browse.runs_matching(filters), browse.RUNS_PER_PAGE).get_page(
        request.GET.get("page")
    )
    for run in page.object_list:
        run.matched = filters.matched.get(run.id, "")  # type: ignore[attr-defined]
    context = {
        "page": page,
        "runs": page.object_list,
        "filters": filters,
        "statuses": RunStatus.values,
        "workflows": browse.workflow_names(),
        "can_submit": can_submit(request.user),
    }
    template = "runs/list.html"
    if request.htmx and request.htmx.target == "runs":
        template += "#runs-results"
        context["oob"] = True  # the Clear button and each filter's problem follow the filters
    return render(request, template, context, status=400 if filters.errors else 200)


@viewer_required
def run_detail(request: HttpRequest, run_id: str) -> HttpResponse:
    """A run's page. htmx asks for parts of it by target: `run-view` (run-live and the
    event log: what the URL's parameters decide, asked for by the batches' toggles and
    the event filter, with every parameter in effect) and `run-live` (facts, timeline,
    steps, claims), which polls itself while the run is active and stops once it has
    finished. The answer to `run-live` is the `live-update` partial: run-live plus the
    header's status out of band, and, from the poll that sees the run finished, the
    final event log and the operations."""
    target = request.htmx.target if request.htmx else None
    live = target == "run-live"
    try:
        data = pages.run_page(
            parse_run_id(run_id),
            events_page=request.GET.get("page") or 1,
            event_type=request.GET.get("type", ""),
            events=None if live else True,
            with_timeline=target != "events",
            expand=request.GET.getlist("expand"),
            collapse=request.GET.getlist("collapse"),
        )
    except (ValueError, Run.DoesNotExist) as exc:
        raise Http404(f"no run {run_id}") from exc
    template = "runs/detail.html"
    if target == "run-view":
        template += "#run-view"
    elif target == "events":
        template += "#events"
    elif live:
        template += "#live-update"
    toggles = []
    if data.timeline is not None:
        toggles = [(t, pages.toggle_url(request.GET, t)) for t in data.timeline.toggles]
    return render(
        request,
        template,
        {
            "page": data,
            "run": data.run,
            "finished": data.run.status in RUN_FINISHED,
            # Still changing: an active run, or a cancelled one whose attempts that were
            # running have not finished yet. The page refreshes itself while it moves.
            "moving": data.run.status not in RUN_FINISHED or has_live_attempt(data),
            "active_statuses": RUN_ACTIVE,
            "retry": retry_offer(data),
            "awaited_signals": awaited_signals(data),
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


def has_live_attempt(data: pages.RunPage) -> bool:
    attempts = [a for row in data.steps for a in row.attempts]
    attempts += [a for row in data.steps for batch in row.batches for a in batch.attempts]
    return any(a.status == AttemptStatus.RUNNING for a in attempts)


def awaited_signals(data: pages.RunPage) -> list[str]:
    """The signals the run's waiting steps wait for (the signal form offers them)."""
    from runs.workflows import registry

    wf = registry.get(data.run.workflow, data.run.version)
    names: list[str] = []
    for row in data.steps:
        stepdef = wf.steps.get(row.step.name) if wf else None
        spec = stepdef.wait if stepdef else None
        if row.step.status == StepStatus.WAITING and spec and spec.signal:
            names.append(spec.signal)
    return sorted(set(names))


def failed_steps(data: pages.RunPage, *, compensations_only: bool = False) -> list[str]:
    """Failed top-level steps, and map steps by name for their failed batches."""
    keys: list[str] = []
    for row in data.steps:
        if compensations_only and not row.step.compensates:
            continue
        if row.step.status == StepStatus.FAILED:
            keys.append(row.step.key)
        elif any(b.step.status == StepStatus.FAILED for b in row.batches):
            keys.append(row.step.name)
    return keys


@dataclass(frozen=True)
class RetryOffer:
    """What the run page offers to retry (`steps`), or, where a step failed and
    nothing can be retried, why not (`why_not`, shown in place of the button)."""

    steps: list[str]
    why_not: str = ""


def retry_offer(data: pages.RunPage) -> RetryOffer:
    """Only what the engine would do (runs/engine/policies/operate.py retry_steps): the failed
    steps of a failed run; in a run that was undone (its compensations ran) only its
    failed compensations; never a run retention has touched. The engine's own preview
    has the last word."""
    run = data.run
    if not failed_steps(data):
        return RetryOffer([])
    if run.status != RunStatus.FAILED:
        if run.status not in RUN_FINISHED:
            return RetryOffer([])  # still going: its steps' retry policies decide
        return RetryOffer(
            [], f"Not retryable: only a failed run's steps are retried; this run is {run.status}."
        )
    if run.retention_started_at is not None:
        return RetryOffer(
            [],
            "Not retryable: retention compacted this run; what a retried step reads "
            "(its inputs, results, map items) may be gone.",
        )
    undone = any(row.step.compensates for row in data.steps)
    keys = failed_steps(data, compensations_only=undone)
    if not keys:
        return RetryOffer(
            [],
            "Not retryable: this run was undone (its compensations ran); a step of its "
            "plan is not run again, only a failed compensation would be.",
        )
    try:
        engine.preview_retry(run_id=run.id, step_keys=keys)
    except (engine.RunNotActive, engine.StepNotRetryable) as exc:
        return RetryOffer([], f"Not retryable: {exc}")
    return RetryOffer(keys)


@submitter_required
def new_run(request: HttpRequest) -> HttpResponse:
    """Submit a run from a form generated from the workflow's input schema. Choosing
    another workflow swaps the fields (htmx); the workflow's own validation decides,
    its problems shown beside their fields, and a refused submission writes nothing."""
    data = request.POST if request.method == "POST" else request.GET
    known = registry.all_workflows()
    names = sorted({wf.name for wf in known})
    chosen = data.get("workflow") or (names[0] if names else "")
    version_text = data.get("version", "")
    context: dict[str, object] = {"names": names, "chosen": chosen, "errors": []}
    try:
        version = int(version_text) if version_text else None
        wf = engine.resolve_workflow(chosen, version)
    except (ValueError, engine.EngineError) as exc:
        context["errors"] = [str(exc) if not isinstance(exc, ValueError) else "bad version"]
        return render(request, "runs/new.html", context, status=400 if data else 200)
    fields = submitform.fields_from_schema(wf.input_schema())
    context.update(wf=wf, versions=registry.versions(wf.name), fields=fields)
    if request.method == "POST":
        run_input = submitform.parse(fields, request.POST)
        if not any(f.errors for f in fields):
            try:
                run = engine.submit(
                    workflow=wf.name,
                    version=wf.version,
                    input=run_input,
                    by=engine.Principal.of_user(request.user, "page"),
                ).run
            except engine.InvalidInput as exc:
                context["errors"] = submitform.attach_problems(fields, exc.by_field, exc.problems)
            else:
                messages.success(request, f"Run submitted: {wf.name} v{wf.version}.")
                if request.htmx:
                    return HttpResponseClientRedirect(f"/runs/{run.id}/")
                return redirect("runs:detail", run_id=str(run.id))
        # A refused form is the page again with its problems (200, as Django forms do).
        return render(request, "runs/new.html", context)
    template = "runs/new.html"
    if request.htmx and request.htmx.target == "submit-fields":
        template += "#submit-fields"
    return render(request, template, context)
