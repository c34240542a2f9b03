"""The run page's actions (thin POST views): cancel a run, retry its failed steps. Each
is confirmed in a dialog first, done by an engine service (the API calls the same),
recorded as an event with the operator's name, and answered by reloading the run page
with a message saying what happened."""

from __future__ import annotations

import uuid

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRefresh

from runs import engine, userinput
from runs.errors import EngineError, RunNotActive, RunNotFound, StepNotRetryable
from runs.pages.access import operator_required
from runs.pages.http import SignedInRequest
from runs.reads.summaries import parse_run_id


def _done(request: SignedInRequest, run_id: str) -> HttpResponse:
    """Back to the run page, where the message says what happened."""
    if request.htmx:
        return HttpResponseClientRefresh()
    return redirect("runs:detail", run_id=run_id)


@require_POST
@operator_required
def cancel(request: SignedInRequest, run_id: str) -> HttpResponse:
    try:
        run_uuid = parse_run_id(run_id)
    except ValueError as exc:
        raise Http404(str(exc)) from exc
    try:
        reason = userinput.clean_text(request.POST.get("reason"), "the reason")
    except userinput.BadInput as exc:
        messages.warning(request, f"{exc}; the run was not cancelled.")
        return _done(request, run_id)
    try:
        run = engine.cancel_run(run_id=run_uuid, actor=request.user, reason=reason)
    except RunNotFound as exc:
        raise Http404(str(exc)) from exc
    except RunNotActive as exc:
        messages.warning(request, str(exc))
    else:
        messages.success(
            request,
            f"Run cancelled: no new step will start; {run.error}. Steps already running "
            "finish and are recorded.",
        )
    return _done(request, run_id)


@require_POST
@operator_required
def signal(request: SignedInRequest, run_id: str) -> HttpResponse:
    """Send a signal (a person's decision) to a run that waits for it."""
    try:
        run_uuid = parse_run_id(run_id)
    except ValueError as exc:
        raise Http404(str(exc)) from exc
    try:
        name = userinput.clean_text(request.POST.get("name"), "the signal's name")
        payload = userinput.parse_json(request.POST.get("payload"), "the payload")
    except userinput.BadInput as exc:
        return _signal_refused(request, run_uuid, f"{exc}; nothing was sent.", status=422)
    try:
        engine.send_signal(run_id=run_uuid, name=name, payload=payload, actor=request.user)
    except RunNotFound as exc:
        raise Http404(str(exc)) from exc
    except EngineError as exc:
        # Refused by the engine (an approval by the run's submitter, a duplicate, a wait
        # that ended): said beside the form, as a bad payload is.
        return _signal_refused(request, run_uuid, f"{exc}; nothing was sent.", status=409)
    messages.success(request, f"Signal {name!r} sent: the run goes on from its wait.")
    return _done(request, run_id)


def _signal_refused(
    request: SignedInRequest, run_uuid: uuid.UUID, error: str, *, status: int
) -> HttpResponse:
    """With htmx the dialog stays open: its form again, the error beside the field and
    the payload as typed (a reload would close it and lose what was typed). Without it,
    the run page with the error as its message."""
    if request.htmx:
        context = {
            "run_id": run_uuid,
            "name": request.POST.get("name", ""),
            "payload": request.POST.get("payload", ""),
            "error": error,
        }
        return render(request, "runs/operations.html#signal-form", context, status=status)
    messages.warning(request, error)
    return _done(request, str(run_uuid))


def _step_keys(request: SignedInRequest) -> list[str]:
    return [key for key in request.GET.getlist("step") + request.POST.getlist("step") if key]


@operator_required
def retry_preview(request: SignedInRequest, run_id: str) -> HttpResponse:
    """What retrying the failed steps would do (the dialog's content)."""
    try:
        plan = engine.preview_retry(run_id=parse_run_id(run_id), step_keys=_step_keys(request))
        error = ""
    except (ValueError, RunNotFound) as exc:
        raise Http404(str(exc)) from exc
    except (RunNotActive, StepNotRetryable) as exc:
        plan, error = None, str(exc)
    return render(
        request,
        "runs/operations.html#retry-preview",
        {"plan": plan, "error": error, "run_id": run_id, "steps": _step_keys(request)},
    )


@require_POST
@operator_required
def retry(request: SignedInRequest, run_id: str) -> HttpResponse:
    keys = _step_keys(request)
    try:
        run = engine.retry_steps(run_id=parse_run_id(run_id), step_keys=keys, actor=request.user)
    except (ValueError, RunNotFound) as exc:
        raise Http404(str(exc)) from exc
    except (RunNotActive, StepNotRetryable) as exc:
        messages.warning(request, str(exc))
    else:
        messages.success(
            request,
            f"Retrying {', '.join(keys)}: the run is {run.status.replace('_', ' ')} again; "
            "effects that already happened are not repeated.",
        )
    return _done(request, run_id)
