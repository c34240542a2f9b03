"""The registry of workflows this process knows, by (name, version).

A worker refuses steps of a workflow version it does not know (DESIGN.md §7), so the
registry is the single answer to "can this process run that run?"."""

from __future__ import annotations

from .definition import Workflow, WorkflowDefinitionError

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


def get(name: str, version: int) -> Workflow | None:
    return _registry.get((name, version))


def versions(name: str) -> list[int]:
    return sorted(v for (n, v) in _registry if n == name)


def latest(name: str) -> Workflow | None:
    known = versions(name)
    return _registry[(name, known[-1])] if known else None


def all_workflows() -> list[Workflow]:
    return [_registry[k] for k in sorted(_registry)]
