"""Public API for writing workflows: see definition.py and the README."""

from .definition import (
    GUARDED,
    IDEMPOTENT,
    PURE,
    TRANSACTIONAL,
    Collected,
    Context,
    FencingToken,
    Field,
    NotApplied,
    ProbeResult,
    Retry,
    StepDef,
    Workflow,
    WorkflowDefinitionError,
)
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
