"""The pauses page (docs/operating.md#pause-and-resume): what is paused, by whom and
why, the audit of pauses and resumes, and for operators the forms that pause and
resume. Thin: the engine's pause() and resume() decide and record; a refusal is shown
beside the field it is about (422), and changes nothing."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from runs import engine, userinput
from runs.errors import AlreadyPaused, NotPaused, PauseError, UnknownWorkflow
from runs.pages.access import operator_required, viewer_required
from runs.pages.http import SignedInRequest
from runs.pages.partials import template_for
from runs.pages.timefmt import humanize_delta, to_the_second

from . import queries

# Where a resume goes back to (the overview's Paused panel, or this page).
BACK = {"overview": "runs:overview", "pauses": "runs:pauses"}


def _context(chosen: str, **extra: Any) -> dict[str, Any]:
    # Nothing is chosen for the operator unless the page was opened for a workflow
    # (`?workflow=`, from a run or the queue): a hurried one must not pause the
    # alphabetically first workflow by not looking.
    names = queries.workflow_names()
    if chosen not in names:
        chosen = ""
    return {
        "pauses": queries.pauses_in_effect(),
        "audit": queries.pause_audit(),
        "names": names,
        "chosen": chosen,
        "steps": engine.step_names(chosen) if chosen else [],
        "form": {"step": "", "reason": ""},
        "errors": {},
        "resume_error_id": None,
        "resume_error": "",
        **extra,
    }


@viewer_required
def pauses_page(request: SignedInRequest) -> HttpResponse:
    """GET: the page. `?workflow=` picks the form's workflow (its steps come with it;
    htmx asks for the step field alone when the workflow select changes), and `?step=`
    one of its steps (an incident group's "Pause this step…")."""
    context = _context(request.GET.get("workflow", ""))
    if request.GET.get("step", "") in context["steps"]:
        context["form"] = {**context["form"], "step": request.GET["step"]}
    template = template_for(request, "runs/pauses.html", {"pause-step-field": "step-field"})
    return render(request, template, context)


@require_POST
@operator_required
def pause(request: SignedInRequest) -> HttpResponse:
    form = {k: request.POST.get(k, "") for k in ("workflow", "step", "reason")}
    errors: dict[str, str] = {}
    if not form["workflow"]:
        errors["workflow"] = "Choose the workflow to pause."
        return _refused(request, form, errors)
    try:
        values = {k: userinput.clean_text(v, f"the {k}") for k, v in form.items()}
    except userinput.BadInput as exc:
        errors["reason"] = str(exc)
    else:
        try:
            made = engine.pause(
                workflow=values["workflow"],
                step=values["step"],
                actor=request.user,
                reason=values["reason"],
            )
        except UnknownWorkflow as exc:
            errors["workflow"] = str(exc)
        except AlreadyPaused as exc:
            # When, as the page says times: how long ago, to the second.
            errors[exc.field or "form"] = (
                f"{exc.what} is already paused: by {exc.actor} "
                f"{humanize_delta(timezone.now() - exc.when)} "
                f"({to_the_second(exc.when)}): {exc.reason}"
            )
        except PauseError as exc:
            errors[exc.field or "form"] = str(exc)
        else:
            what = f"step {made.step} of {made.workflow}" if made.step else made.workflow
            messages.success(
                request,
                f"Paused {what}: no new attempt of it starts; attempts already running "
                "finish and are recorded.",
            )
            return redirect("runs:pauses")
    return _refused(request, form, errors)


def _refused(
    request: SignedInRequest, form: dict[str, str], errors: dict[str, str]
) -> HttpResponse:
    """The page again, what was typed kept, each problem beside its field (422)."""
    context = _context(form["workflow"], form=form, errors=errors)
    return render(request, "runs/pauses.html", context, status=422)


@require_POST
@operator_required
def resume(request: SignedInRequest, pause_id: int) -> HttpResponse:
    back = BACK.get(request.POST.get("back", ""), "runs:pauses")
    error = ""
    try:
        reason = userinput.clean_text(request.POST.get("reason"), "the reason")
        resumed = engine.resume(pause_id=pause_id, actor=request.user, reason=reason)
    except userinput.BadInput as exc:
        error = str(exc)
    except NotPaused as exc:
        messages.warning(request, str(exc))
        return redirect(back)
    except PauseError as exc:
        error = str(exc)
    else:
        what = resumed.pause.workflow + (
            f" (step {resumed.pause.step})" if resumed.pause.step else ""
        )
        messages.success(
            request,
            f"Resumed {what}: {len(resumed.republished)} waiting step"
            f"{'' if len(resumed.republished) == 1 else 's'} sent again.",
        )
        return redirect(back)
    context = _context("", resume_error_id=pause_id, resume_error=error)
    return render(request, "runs/pauses.html", context, status=422)
