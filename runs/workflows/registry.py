"""The registry of workflows this process knows, by (name, version).

A worker refuses steps of a workflow version it does not know (docs/architecture.md#recovery),
so the
registry is the single answer to "can this process run that run?"."""

from __future__ import annotations

import difflib
from typing import Any, Protocol

from runs.errors import EngineError

from .definition import Workflow
from .errors import WorkflowDefinitionError
from .schedules import check_schedule_fields


class ScheduleRow(Protocol):
    """What check_schedule_row reads of a schedule row (runs.models.Schedule)."""

    name: str
    cron: str
    timezone: str
    missed: str
    max_catch_up: int
    declared_in_code: bool
    workflow: str
    version: int | None
    input: Any


_registry: dict[tuple[str, int], Workflow] = {}


def register(workflow: Workflow) -> Workflow:
    key = (workflow.name, workflow.version)
    existing = _registry.get(key)
    if existing is not None and existing is not workflow:
        raise WorkflowDefinitionError(
            f"workflow {workflow.name} v{workflow.version} is declared twice"
        )
    _registry[key] = workflow
    return workflow


def unregister(workflow: Workflow) -> None:
    """Forget `workflow` if it is the one registered under its name and version (for a
    test that declares its own, tests/support/declared.py); otherwise nothing."""
    key = (workflow.name, workflow.version)
    if _registry.get(key) is workflow:
        del _registry[key]


def get(name: str, version: int) -> Workflow | None:
    return _registry.get((name, version))


def versions(name: str) -> list[int]:
    return sorted(v for (n, v) in _registry if n == name)


def latest(name: str) -> Workflow | None:
    known = versions(name)
    return _registry[(name, known[-1])] if known else None


def all_workflows() -> list[Workflow]:
    return [_registry[k] for k in sorted(_registry)]


def names() -> list[str]:
    """The registered workflows' names, each once, sorted."""
    return sorted({name for (name, _) in _registry})


def close_names(name: str, n: int = 3) -> list[str]:
    """The registered names most like `name` (a misspelling's likely meaning), best
    first, at most `n`; none when nothing is close."""
    return difflib.get_close_matches(name, names(), n=n, cutoff=0.6)


def why_unknown(name: str) -> str:
    """Why `name` names no registered workflow, with the names most like it (a
    misspelling's likely meaning); "" when some version of it is registered."""
    if versions(name):
        return ""
    close = close_names(name)
    if close:
        said = close[0] if len(close) == 1 else f"{', '.join(close[:-1])} or {close[-1]}"
        return f"no workflow named {name!r} is registered (did you mean {said}?)"
    known = ", ".join(names()) or "none is registered"
    return f"no workflow named {name!r} is registered (the workflows: {known})"


def search_fields() -> dict[str, list[str]]:
    """Every declared search field (docs/authoring.md#search-fields), by name, with the
    workflows that declare it (in any version), both sorted."""
    found: dict[str, set[str]] = {}
    for wf in all_workflows():
        for name in wf.search:
            found.setdefault(name, set()).add(wf.name)
    return {name: sorted(found[name]) for name in sorted(found)}


def check_schedule_row(schedule: ScheduleRow) -> dict[str, str]:
    """Everything check_schedule_fields checks, plus: the workflow (and version) exist
    here and the input is one the workflow accepts."""
    problems = check_schedule_fields(
        name=schedule.name,
        cron=schedule.cron,
        timezone=schedule.timezone,
        missed=schedule.missed,
        max_catch_up=schedule.max_catch_up,
    )
    if schedule.declared_in_code:
        return problems
    wf = (
        latest(schedule.workflow)
        if schedule.version is None
        else get(schedule.workflow, schedule.version)
    )
    if wf is None:
        known = ", ".join(sorted({w.name for w in all_workflows()}))
        where = "workflow" if not versions(schedule.workflow) else "version"
        problems[where] = (
            f"no workflow {schedule.workflow!r}"
            + ("" if schedule.version is None else f" v{schedule.version}")
            + f"; known: {known}"
        )
        return problems
    try:
        wf.validate_input(schedule.input)
    except EngineError as exc:
        problems["input"] = str(exc)
    return problems
