"""tests/support/declared.py: a test module's own workflows are registered while a test
runs and gone afterwards, and never replace one the suite already declares."""

from __future__ import annotations

import pytest

from runs.workflows import PURE, Context, Workflow, WorkflowDefinitionError, registry
from tests.support.declared import registered


def _workflow(name: str) -> Workflow:
    wf = Workflow(name, version=1)

    @wf.step(kind=PURE)
    def only(ctx: Context) -> str:
        return "done"

    return wf


def test_registered_only_while_inside():
    wf = _workflow("declared-for-a-moment")
    with registered(wf):
        assert registry.get("declared-for-a-moment", 1) is wf
    assert registry.get("declared-for-a-moment", 1) is None


def test_a_name_the_suite_declares_is_refused_and_the_registry_left_as_it_was():
    shared = registry.get("pure-chain", 1)  # tests/support/workflows.py
    before = registry.all_workflows()
    mine = _workflow("declared-first")
    with pytest.raises(WorkflowDefinitionError, match="declared twice"):
        with registered(mine, _workflow("pure-chain")):
            pass
    assert registry.all_workflows() == before
    assert registry.get("pure-chain", 1) is shared
