"""Public API for writing workflows: see docs/authoring.md, definition.py (declaring a
workflow and its steps), inputs.py (its input) and context.py (what a step receives)."""

from .context import Collected, Context, FencingToken
from .definition import (
    GUARDED,
    IDEMPOTENT,
    PURE,
    TRANSACTIONAL,
    NotApplied,
    ProbeResult,
    Retry,
    StepDef,
    Workflow,
)
from .errors import WorkflowDefinitionError
from .inputs import Field
from .registry import register


def workflow(name: str, version: int = 1, **kwargs: object) -> Workflow:
    """Declare and register a workflow in one go."""
    return register(Workflow(name, version, **kwargs))  # type: ignore[arg-type]


__all__ = [
    "GUARDED",
    "IDEMPOTENT",
    "PURE",
    "TRANSACTIONAL",
    "Collected",
    "Context",
    "FencingToken",
    "Field",
    "NotApplied",
    "ProbeResult",
    "Retry",
    "StepDef",
    "Workflow",
    "WorkflowDefinitionError",
    "register",
    "workflow",
]
