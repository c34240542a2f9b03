"""What the engine derives from a workflow's definition, derived once per process.

A definition does not change while a process runs, and the hot path asks the same
questions of it on every step (a step's dependents, whether its successor can start in
its finish, a run's leaf steps). Kept by the definition's identity: a definition
registered again (a test's, or a reload) is a new object and is asked afresh."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

_KEPT: dict[tuple[str, int, Hashable], tuple[Any, Any]] = {}


def once(what: str, workflow: Any, key: Hashable, derive: Callable[[], T]) -> T:
    """derive(), the first time `what` is asked of this definition for `key` in this
    process; what it returned then, every time after."""
    slot = (what, id(workflow), key)
    entry = _KEPT.get(slot)
    if entry is None or entry[0] is not workflow:  # an id reused by a newer definition
        entry = _KEPT[slot] = (workflow, derive())
    found: T = entry[1]
    return found
