"""Public API for writing workflows: see docs/authoring.md, definition.py (declaring a
workflow and its steps), inputs.py (its input) and context.py (what a step receives)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .context import Collected, Context, FencingToken
from .definition import (
    GUARDED,
    IDEMPOTENT,
    PURE,
    TRANSACTIONAL,
    Breaker,
    NotApplied,
    ProbeResult,
    Retry,
    StepDef,
    Workflow,
)
from .errors import WorkflowDefinitionError
from .inputs import Field
from .limits import Limit, Rate
from .registry import register

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from datetime import timedelta


def workflow(
    name: str,
    version: int = 1,
    *,
    input: Mapping[str, Any] | type[Any] | None = None,
    description: str = "",
    search: tuple[str, ...] = (),
    deadline: float | timedelta | None = None,
    effects: Callable[[str], int] | None = None,
    expected_effects: Callable[[dict[str, Any]], int] | None = None,
    limit: Limit | None = None,
    rate: Rate | None = None,
) -> Workflow:
    """Declare a workflow and register it (registry.register) in one go.

    Steps are then declared on the returned Workflow with its decorators (`step`,
    `map_step`, `wait`, `sleep`, `compensation`) and schedules with `schedule`.
    A workflow applies no effect kind of its own: each step names its kind.

    Parameters
    ----------
    name:
        The workflow's name, by which runs are submitted (API, UI, engine.submit_run).
    version:
        A positive int, default 1. Runs keep the version they were submitted with, so a
        changed definition is declared under a new version beside the old one; two
        workflows of the same name and version are refused when registered.
    input:
        The declared input (docs/authoring.md#input, inputs.py): a mapping of field
        name to a type (str, int, float, bool, list, dict, list[T], dict[str, T] or
        `T | None`) or a `Field(...)` with a default and, for a number, bounds; or a
        pydantic model class that stands instead of them. Default None: no input.
        Every submitted input is validated against it before the run exists.
    description:
        Free text shown in the UI and the API's schema for the input. Default `""`.
    search:
        Names of declared input fields a run is found by in the runs list and the API
        (docs/authoring.md#search-fields), e.g. `("change_id",)`. A tuple, not a
        string. Default `()`: no search field.
    deadline:
        How long a run may take, from its submission, in seconds or a timedelta
        (docs/authoring.md#deadlines): past it no new step starts and the run ends as
        a cancel would, its compensations included. A submission may give an earlier
        deadline (the earlier applies). Default None: no deadline. Refused if not
        positive.
    effects:
        Optional, for `manage.py crashcheck`: `effects(run_id) -> int` counts the
        external effects a run made. Default None.
    expected_effects:
        Optional, with `effects`: `expected_effects(input) -> int`, how many effects a
        correct run with this input makes. Default None.
    limit:
        A `Limit(max=n)`: at most n attempts of this workflow's steps running at once,
        across all its runs and versions; `Limit(per="field", max=n)`: at most n per
        value of that input field (docs/authoring.md#limits-and-holds). Default None.
    rate:
        A `Rate(starts=n, every=seconds)`: at most n starts of its steps per interval,
        across all workers; `per="field"`: per value of that input field. Default None.
    """
    return register(
        Workflow(
            name,
            version,
            input={} if input is None else input,
            description=description,
            search=search,
            deadline=deadline,
            effects=effects,
            expected_effects=expected_effects,
            limit=limit,
            rate=rate,
        )
    )


__all__ = [
    "GUARDED",
    "IDEMPOTENT",
    "PURE",
    "TRANSACTIONAL",
    "Breaker",
    "Collected",
    "Context",
    "FencingToken",
    "Field",
    "Limit",
    "NotApplied",
    "ProbeResult",
    "Rate",
    "Retry",
    "StepDef",
    "Workflow",
    "WorkflowDefinitionError",
    "register",
    "workflow",
]
