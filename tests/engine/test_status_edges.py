"""One writer per status edge (docs/architecture.md#where-each-transition-lives): the
edges that carry follow-ups — a step fails for good (its claims close, its run fails or
compensates), a step succeeds (its dependents, the run's end), a step is queued (again),
a run starts — are each
written by one function, so no new site can move a status and forget what follows.
Read from the engine's source: a hand-written UPDATE or event for one of these edges
anywhere else fails here, naming the file and line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runs.record import events

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "runs" / "engine"
MODULES = sorted(ENGINE.rglob("*.py"))


def _where(path: Path, node: ast.AST) -> str:
    return f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', '?')}"


def _event_writes(name: str) -> list[str]:
    """Where `events.<name>` (the type's constant) or its catalogue class is named in the
    engine: each one an append_event of it, in the old form or the typed one."""
    names = {name, events.CATALOGUE[getattr(events, name)].__name__}
    found = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in names
                and isinstance(node.value, ast.Name)
                and node.value.id == "events"
            ):
                found.append(_where(path, node))
    return found


def _status_updates(status: str) -> list[str]:
    """Where an ORM `.update(status=<status>, ...)` sets that status in the engine."""
    found = []
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text())):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "update"
            ):
                continue
            for keyword in node.keywords:
                if keyword.arg == "status" and ast.unparse(keyword.value) == status:
                    found.append(_where(path, node))
    return found


def _files(places: list[str]) -> set[str]:
    return {place.rsplit(":", 1)[0] for place in places}


@pytest.mark.parametrize(
    ("event", "homes"),
    [
        # state/steps.step_to_failed, which state/run.fail_step wraps with the run's follow-up.
        ("STEP_FAILED", {"runs/engine/state/steps.py"}),
        # state/ready.succeed_step; attempts/finish.py is its fast twin (one statement for
        # the step, its claim and its dependents, then the same step_succeeded()).
        ("STEP_SUCCEEDED", {"runs/engine/state/ready.py", "runs/engine/attempts/finish.py"}),
        ("RUN_STARTED", {"runs/engine/state/run.py"}),
        # state/run.fail_run; and a compensating run that ends as it was ending (failed,
        # or cancelled) when its last compensation succeeds: state/compensation.py's
        # compensation_succeeded, the one home of that edge.
        ("RUN_FAILED", {"runs/engine/state/run.py", "runs/engine/state/compensation.py"}),
        # state/steps.step_to_queued, from every status a step may start again from, and
        # for the steps a submission inserts queued.
        ("STEP_QUEUED", {"runs/engine/state/steps.py"}),
    ],
)
def test_an_edges_event_is_written_only_by_its_edge(event, homes):
    places = _event_writes(event)
    assert places, f"no writer of events.{event} found: has the edge moved?"
    assert _files(places) <= homes, f"events.{event} written by hand at {places}"


@pytest.mark.parametrize(
    ("status", "homes"),
    [
        ("StepStatus.FAILED", {"runs/engine/state/steps.py"}),
        ("StepStatus.SUCCEEDED", {"runs/engine/state/ready.py"}),
        ("StepStatus.QUEUED", {"runs/engine/state/steps.py"}),
    ],
)
def test_a_step_moves_to_these_statuses_only_through_their_edge(status, homes):
    places = _status_updates(status)
    assert places, f"no UPDATE to {status} found: has the edge moved?"
    assert _files(places) <= homes, f"an UPDATE to {status} by hand at {places}"


def test_the_step_edge_without_its_run_is_called_only_where_the_run_has_stopped():
    """state/steps.step_to_failed leaves the run as it is: only state/run.fail_step (which
    adds the run's follow-up) and state/stopped.py (settling a run that stopped) call it."""
    callers = {
        str(path.relative_to(ROOT))
        for path in MODULES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("step_to_failed")
    }
    assert callers == {"runs/engine/state/run.py", "runs/engine/state/stopped.py"}
