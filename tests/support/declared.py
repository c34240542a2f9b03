"""Workflows a test module declares next to its tests, registered only while a test runs.

A test module builds its workflows with `Workflow(...)` (which, unlike `workflow(...)`,
does not register) and binds `declared(...)` to a module-level name:

    approval = Workflow("flaky-condition")

    @approval.step(kind=PURE)
    def ask(ctx: Context) -> str: ...

    _workflows = declared(approval)

Every test of that module then finds them in the registry (by name, by the engine, by
run_inline), and after each test they are gone again, so no other test sees them. Only
in-process tests can use this: a real worker process imports tests/support/workflows.py
(RUNS_WORKFLOW_MODULES), never a test module, so a workflow its steps run in lives there.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from runs.workflows import Workflow, registry


@contextmanager
def registered(*workflows: Workflow) -> Iterator[None]:
    """While inside, `workflows` are registered; afterwards the registry is as before.
    The registry holds the only references to a workflow by name (no cache keyed by
    workflow exists elsewhere), so removing its entries removes it."""
    added: list[Workflow] = []
    try:
        for wf in workflows:
            # Refuses a name and version already declared (say, in tests/support/workflows.py).
            registry.register(wf)
            added.append(wf)
        yield
    finally:
        for wf in added:
            registry.unregister(wf)


@contextmanager
def withheld(*workflows: Workflow) -> Iterator[None]:
    """While inside, this process does not know `workflows` (a release that lacks them;
    with every registered workflow, a deployment that declares none); afterwards they are
    registered again, as before."""
    removed: list[Workflow] = []
    try:
        for wf in workflows:
            if registry.get(wf.name, wf.version) is wf:
                registry.unregister(wf)
                removed.append(wf)
        yield
    finally:
        for wf in removed:
            registry.register(wf)


def declared(*workflows: Workflow) -> Callable[[], Iterator[None]]:
    """An autouse fixture that registers `workflows` for each test of the module it is
    bound in (see the module's docstring)."""
    names = ",".join(f"{wf.name}@{wf.version}" for wf in workflows)

    @pytest.fixture(autouse=True, name=f"declared[{names}]")
    def _declared() -> Iterator[None]:
        with registered(*workflows):
            yield

    return _declared
