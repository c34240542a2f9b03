"""The run's workflow version, for a decision that needs it (docs/reliability.md#version-skew).

Deploys overlap: a web process or worker of one release meets runs of a version only
another release has. `registry.get()` then answers None, and None must never read as
"nothing to do" (nothing to compensate, one attempt, nothing follows): a decision that
needs the definition asks for it here and is refused, before anything is written,
with a stable code that a batch item shows as "refused" and the API as a 409.
"""

from __future__ import annotations

from runs.errors import WorkflowVersionUnknown
from runs.models import Run
from runs.workflows import registry
from runs.workflows.definition import Workflow


def workflow_of(run: Run, *, doing: str) -> Workflow:
    """The run's workflow definition; WorkflowVersionUnknown if this process lacks it.
    `doing` completes "so it cannot …" in the refusal."""
    workflow = registry.get(run.workflow, run.version)
    if workflow is None:
        raise WorkflowVersionUnknown(run, doing)
    return workflow
