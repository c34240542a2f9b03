"""The engine's two doors (docs/architecture.md#the-engines-layers): runs.engine holds
its verbs and their result types, at most 40 names; runs.engine.tools the hooks of the
tools and the tests. Who may import which is pyproject.toml's import contracts."""

from __future__ import annotations

import inspect
import types

import pytest

from runs import engine
from runs.engine import tools

DOORS = (engine, tools)


def test_the_door_lists_at_most_40_names():
    assert len(engine.__all__) <= 40
    assert len(set(engine.__all__)) == len(engine.__all__)


def test_the_door_holds_what_it_lists_and_nothing_else():
    """A name reachable as runs.engine.<name> is in __all__, so the count above counts
    it: only the engine's own packages (its layers, the tools' door) are left out."""
    public = {
        name
        for name, value in vars(engine).items()
        if not name.startswith("_")
        and not (isinstance(value, types.ModuleType) and name not in engine.__all__)
    }
    assert public == set(engine.__all__)


def test_the_two_doors_share_no_name():
    assert not set(engine.__all__) & set(tools.__all__)


@pytest.mark.parametrize("door", DOORS, ids=lambda door: door.__name__)
def test_every_function_of_a_door_says_what_it_does(door):
    for name in door.__all__:
        value = getattr(door, name)
        if inspect.isfunction(value):
            assert (value.__doc__ or "").strip(), f"{door.__name__}.{name} has no docstring"
