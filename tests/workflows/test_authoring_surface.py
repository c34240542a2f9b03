"""The authoring surface (runs.workflows: workflow() and Workflow's decorators) takes
real keyword parameters, documents each in its docstring, and hands back the decorated
function unchanged. Checked twice: at run time here, and statically by mypy, which
`make lint` runs on this file ([tool.mypy] files in pyproject.toml)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, assert_type, cast

import pytest

from runs.workflows import IDEMPOTENT, PURE, Context, Retry, Workflow, workflow

SURFACE: list[Callable[..., Any]] = [
    workflow,
    Workflow.step,
    Workflow.map_step,
    Workflow.compensation,
    Workflow.wait,
    Workflow.sleep,
    Workflow.schedule,
]


@pytest.mark.parametrize("function", SURFACE, ids=lambda f: f.__name__)
def test_every_parameter_is_a_named_parameter_documented_in_the_docstring(
    function: Callable[..., Any],
) -> None:
    parameters = [p for p in inspect.signature(function).parameters.values() if p.name != "self"]
    kinds = {p.kind for p in parameters}
    assert inspect.Parameter.VAR_KEYWORD not in kinds
    assert inspect.Parameter.VAR_POSITIONAL not in kinds
    doc = inspect.getdoc(function) or ""
    documented = doc.split("Parameters\n----------\n", 1)
    assert len(documented) == 2, f"{function.__name__} has no Parameters section"
    missing = [p.name for p in parameters if f"\n{p.name}:\n" not in f"\n{documented[1]}"]
    assert missing == []


def test_the_decorators_hand_back_the_function_with_its_own_type() -> None:
    wf = Workflow("typed-surface", 1, input={"n": int})

    @wf.step(kind=PURE, retry=Retry(max_attempts=1))
    def numbers(ctx: Context) -> list[int]:
        return list(range(ctx.input["n"]))

    @wf.map_step(over="numbers", batch_size=10, kind=IDEMPOTENT)
    def double(ctx: Context, item: int) -> int:
        return item * 2

    @wf.compensation(kind=PURE)
    def undo(ctx: Context) -> None:
        return None

    @wf.wait(signal="go", timeout=timedelta(hours=1))
    def go(ctx: Context) -> None:
        return None

    @wf.sleep()
    def pause(ctx: Context) -> timedelta:
        return timedelta(seconds=1)

    @wf.schedule("0 6 * * *")
    def nightly(tick: datetime) -> dict[str, int]:
        return {"n": tick.day}

    if TYPE_CHECKING:  # what mypy sees: each function's own parameters and result
        ctx = cast(Context, None)
        assert_type(numbers(ctx), list[int])
        assert_type(double(ctx, 1), int)
        assert_type(undo(ctx), None)
        assert_type(go(ctx), None)
        assert_type(pause(ctx), timedelta)
        assert_type(nightly(datetime.now()), dict[str, int])
        double(ctx)  # type: ignore[call-arg]
    assert wf.steps["numbers"].fn is numbers
    assert wf.steps["double"].fn is double
    assert wf.compensations["undo"].fn is undo
    assert wf.steps["pause"].wait is not None and wf.steps["pause"].wait.deadline is pause
    assert wf.schedules[0].input_fn is nightly


if TYPE_CHECKING:
    # Statically only (workflow() registers globally): the keyword parameters are
    # checked, and the declared workflow is a Workflow.
    assert_type(workflow("typed", version=2, input={"n": int}, search=("n",)), Workflow)
    workflow("typed", kind=PURE)  # type: ignore[call-arg]
