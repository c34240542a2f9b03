"""Bad input gets a clear error naming the problem, and writes nothing."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from runs import engine
from runs.errors import InvalidInput, UnknownVersion, UnknownWorkflow
from runs.models import Claim, Event, Run, Step
from runs.workflows import PURE, Context, Field, Workflow
from tests.support.declared import declared

# Input with parameterised types.
typed_input = Workflow(
    "typed-input",
    version=1,
    input={
        "ids": list[int],
        "weights": Field(dict[str, float], default={}),
        "groups": Field(list[dict[str, list[int]]], default=[]),
        "note": Field(str | None, default=None),
        "ratio": Field(float, default=0.5, min=0),
    },
)


@typed_input.step(kind=PURE)
def echo(ctx: Context) -> dict[str, Any]:
    return ctx.input


_workflows = declared(typed_input)


def assert_nothing_written() -> None:
    assert (
        Run.objects.count(),
        Step.objects.count(),
        Event.objects.count(),
        Claim.objects.count(),
    ) == (0, 0, 0, 0)


@pytest.mark.parametrize(
    ("workflow", "version", "data", "error", "message"),
    [
        ("no-such-flow", None, {}, UnknownWorkflow, "unknown workflow 'no-such-flow'"),
        (
            "merge-change",
            7,
            {"change_id": 1},
            UnknownVersion,
            "workflow 'merge-change' has no version 7; known versions: 1",
        ),
        ("merge-change", None, {}, InvalidInput, "missing field 'change_id' (int)"),
        (
            "merge-change",
            None,
            {"change_id": "42"},
            InvalidInput,
            "field 'change_id' must be int, got str",
        ),
        (
            "merge-change",
            None,
            {"change_id": True},
            InvalidInput,
            "field 'change_id' must be int, got bool",
        ),
        (
            "merge-change",
            None,
            {"change_id": 0},
            InvalidInput,
            "field 'change_id' must be at least 1, got 0",
        ),
        (
            "charge-payment",
            1,
            {"amount": 5, "amuont": 5},
            InvalidInput,
            "unknown field 'amuont'",
        ),
        ("migrate-records", 1, [500], InvalidInput, "input must be a JSON object"),
        ("typed-input", 1, {}, InvalidInput, "missing field 'ids' (list[int])"),
        (
            "typed-input",
            1,
            {"ids": [1, 2, "3"]},
            InvalidInput,
            "field 'ids'[2] must be int, got str",
        ),
        (
            "typed-input",
            1,
            {"ids": None},
            InvalidInput,
            "field 'ids' must be list[int], got None",
        ),
        (
            "typed-input",
            1,
            {"ids": [], "weights": {"a": 1, "b": True}},
            InvalidInput,
            "field 'weights'['b'] must be float, got bool",
        ),
        (
            "typed-input",
            1,
            {"ids": [], "groups": [{"x": [1]}, {"y": [2, None]}]},
            InvalidInput,
            "field 'groups'[1]['y'][1] must be int, got None",
        ),
        (
            "typed-input",
            1,
            {"ids": [], "note": 5},
            InvalidInput,
            "field 'note' must be str | None, got int",
        ),
        (
            "typed-input",
            1,
            {"ids": [], "ratio": -1},
            InvalidInput,
            "field 'ratio' must be at least 0, got -1",
        ),
    ],
)
def test_submit_run_refuses_bad_input_and_writes_nothing(
    db, workflow, version, data, error, message
):
    with pytest.raises(error) as excinfo:
        engine.submit_run(workflow=workflow, version=version, input=data)
    assert message in str(excinfo.value)
    assert_nothing_written()


def test_submit_run_reports_every_problem_of_parameterised_input(db):
    with pytest.raises(InvalidInput) as excinfo:
        engine.submit_run(
            workflow="typed-input", input={"ids": ["a", 2, "c"], "weights": [], "extra": 1}
        )
    assert excinfo.value.problems == [
        "unknown field 'extra'",
        "field 'ids'[0] must be int, got str",
        "field 'ids'[2] must be int, got str",
        "field 'weights' must be dict[str, float], got list",
    ]
    assert_nothing_written()


def test_submit_run_accepts_parameterised_input_and_fills_defaults(db):
    run = engine.submit_run(
        workflow="typed-input",
        input={"ids": [3, 1], "weights": {"a": 1, "b": 0.5}, "groups": [{"x": []}], "note": None},
    )
    assert run.input == {
        "ids": [3, 1],
        "weights": {"a": 1.0, "b": 0.5},
        "groups": [{"x": []}],
        "note": None,
        "ratio": 0.5,
    }
    assert isinstance(run.input["weights"]["a"], float)


def test_submit_run_lists_known_workflows_for_unknown_name(db):
    with pytest.raises(UnknownWorkflow) as excinfo:
        engine.submit_run(workflow="merge", input={})
    message = str(excinfo.value)
    assert message.startswith("unknown workflow 'merge'; known workflows: ")
    for name in ("charge-payment", "merge-change", "merge-change-probed", "migrate-records"):
        assert name in message.split(": ", 1)[1].split(", ")


def test_submit_run_fills_defaults_and_writes_plan(db):
    run = engine.submit_run(workflow="migrate-records", input={"count": 10})
    assert run.input == {"count": 10, "batch_size": 50}
    assert list(Step.objects.filter(run=run).values_list("key", "status", "pending_deps")) == [
        ("list_records", "queued", 0),
        ("migrate", "pending", 1),
    ]
    assert list(Event.objects.filter(run=run).values_list("seq", "type")) == [
        (1, "run_submitted"),
        (2, "step_queued"),
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["nope"], "unknown workflow 'nope'"),
        (["merge-change", "--version", "2", "--input", '{"change_id": 1}'], "has no version 2"),
        (["merge-change", "--input", "{not json"], "--input is not valid JSON"),
        (["charge-payment", "--input", '{"amount": "ten"}'], "must be int, got str"),
        (
            ["merge-change", "--input", '{"change_id": 1%s}' % ("0" * 200)],
            r"invalid input: field 'change_id' is a search field, so its text must be at "
            r"most 200 characters \(from -\(10\*\*199 - 1\) to 10\*\*200 - 1\); got 201$",
        ),
    ],
)
def test_submit_run_command_errors(db, args, message):
    with pytest.raises(CommandError, match=message):
        call_command("submit_run", *args)
    assert_nothing_written()


def test_submit_run_command_prints_run_id_last(db, capsys):
    call_command("submit_run", "charge-payment", "--version", "1", "--input", '{"amount": 3}')
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert Run.objects.get().id.hex == last.replace("-", "")


def test_show_run_json_contract(db, capsys):
    import json

    run = engine.submit_run(workflow="charge-payment", input={"amount": 3})
    call_command("show_run", str(run.id), "--json")
    data = json.loads(capsys.readouterr().out)
    assert {k: data[k] for k in ("id", "workflow", "version", "status")} == {
        "id": str(run.id),
        "workflow": "charge-payment",
        "version": 1,
        "status": "pending",
    }
    assert data["steps"] == [
        {
            "name": "charge",
            "key": "charge",
            "kind": "idempotent",
            "status": "queued",
            "attempts": 0,
            "error": None,
        }
    ]
    assert data["claims"] == []
    assert data["deadline_at"] is None


def test_show_run_says_the_runs_deadline(db, capsys):
    import json

    deadline = timezone.now() + timedelta(hours=2)
    run = engine.submit_run(workflow="charge-payment", input={"amount": 3}, deadline=deadline)
    call_command("show_run", str(run.id), "--json")
    assert json.loads(capsys.readouterr().out)["deadline_at"] == deadline.isoformat()
    call_command("show_run", str(run.id))
    assert f"deadline {deadline.isoformat()}" in capsys.readouterr().out.splitlines()


def test_show_run_unknown_id(db):
    with pytest.raises(CommandError, match="is not a run id"):
        call_command("show_run", "abc")
    with pytest.raises(CommandError, match="no run with id"):
        call_command("show_run", "00000000-0000-0000-0000-000000000000")
