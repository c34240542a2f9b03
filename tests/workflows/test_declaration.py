from __future__ import annotations

from typing import Optional

import pytest

from runs.engine.tools import faults
from runs.workflows import Field, Retry, Workflow, WorkflowDefinitionError, registry

KINDS_HELP = (
    "  pure           no external effect (compute, read): retried freely\n"
    "  transactional  writes only to this database: effect and claim commit in one "
    "transaction, exactly once\n"
    "  idempotent     calls a system that dedupes by ctx.idempotency_key: retried with "
    "the same key\n"
    "  guarded        an irreversible external effect with no idempotency: never "
    "repeated blindly, an unknown outcome goes to an operator"
)


def test_steps_are_linear_by_default_and_map_depends_on_its_source():
    wf = Workflow("t", 1)

    @wf.step(kind="pure")
    def a(ctx):
        return [1]

    @wf.step(kind="pure")
    def b(ctx):
        return None

    @wf.map_step(over="a", batch_size=10, after=["b"], kind="transactional")
    def c(ctx, item):
        return None

    assert [(s.name, s.after) for s in wf.steps.values()] == [
        ("a", ()),
        ("b", ("a",)),
        ("c", ("b", "a")),
    ]
    assert wf.dependents("a") == ["b", "c"]


@pytest.mark.parametrize(
    ("declare", "message"),
    [
        (
            lambda wf: wf.step(kind="pure", after=["missing"])(lambda ctx: None),
            "not declared before it",
        ),
        (
            lambda wf: wf.map_step(over="missing", batch_size=2, kind="transactional")(
                lambda ctx, i: None
            ),
            "map step over unknown step",
        ),
        (
            lambda wf: wf.map_step(over="a", batch_size="size", kind="transactional")(
                lambda ctx, i: None
            ),
            "batch_size names input field 'size'",
        ),
        (
            lambda wf: wf.map_step(over="a", batch_size=2, kind="guarded")(lambda ctx, i: None),
            "guarded map steps are not supported",
        ),
        (lambda wf: wf.step(kind="pure", name="a")(lambda ctx: None), "duplicate step name 'a'"),
    ],
)
def test_definition_errors_are_caught_when_declared(declare, message):
    wf = Workflow("t", 1)
    wf.step(kind="pure", name="a")(lambda ctx: [])
    with pytest.raises(WorkflowDefinitionError, match=message):
        declare(wf)


def test_step_without_kind_is_refused_naming_workflow_step_and_kinds():
    wf = Workflow("send-invoices", 2)
    with pytest.raises(WorkflowDefinitionError) as excinfo:

        @wf.step()
        def list_customers(ctx):
            return []

    assert str(excinfo.value) == (
        "workflow 'send-invoices' v2, step 'list_customers': kind= is required; "
        "say what the step does outside itself:\n" + KINDS_HELP
    )
    assert wf.steps == {}


def test_map_step_without_kind_is_refused_naming_workflow_step_and_kinds():
    wf = Workflow("send-invoices", 1)
    wf.step(kind="pure", name="list_customers")(lambda ctx: [])
    with pytest.raises(WorkflowDefinitionError) as excinfo:
        wf.map_step(over="list_customers", batch_size=10, name="create_invoice")(
            lambda ctx, item: None
        )

    assert str(excinfo.value) == (
        "workflow 'send-invoices' v1, step 'create_invoice': kind= is required; "
        "say what the step does outside itself:\n" + KINDS_HELP
    )
    assert list(wf.steps) == ["list_customers"]


@pytest.mark.parametrize("declare", ["step", "map_step"])
def test_step_with_unknown_kind_is_refused_listing_the_kinds(declare):
    wf = Workflow("t", 1)
    wf.step(kind="pure", name="a")(lambda ctx: [])
    with pytest.raises(WorkflowDefinitionError) as excinfo:
        if declare == "step":
            wf.step(kind="transactinal", name="b")(lambda ctx: None)
        else:
            wf.map_step(over="a", batch_size=2, kind="transactinal", name="b")(
                lambda ctx, item: None
            )

    assert str(excinfo.value) == (
        "workflow 't' v1, step 'b': unknown kind 'transactinal'; the kinds are:\n" + KINDS_HELP
    )


def test_retry_backoff_is_exponential_capped_and_jittered():
    r = Retry(max_attempts=5, base_delay=1, max_delay=5, jitter=False)
    assert [r.delay(n) for n in range(1, 6)] == [1, 2, 4, 5, 5]
    j = Retry(base_delay=4, jitter=True)
    assert all(2 <= j.delay(1) <= 4 for _ in range(50))
    with pytest.raises(WorkflowDefinitionError):
        Retry(max_attempts=0)


def test_input_defaults_and_floats():
    wf = Workflow("t", 1, input={"n": Field(int, default=3), "x": float})
    assert wf.validate_input({"x": 2}) == {"n": 3, "x": 2.0}


SUPPORTED = (
    "supported: str, int, float, bool, list, dict, list[T], dict[str, T] and T | None "
    "(Optional[T]), nested in any way (e.g. list[dict[str, int]])"
)


def one_field(tp, **field):
    return Workflow("t", 1, input={"v": Field(tp, **field)})


@pytest.mark.parametrize(
    ("tp", "value", "clean"),
    [
        (list[int], [1, 2, 3], [1, 2, 3]),
        (list[float], [1, 2.5], [1.0, 2.5]),
        (dict[str, int], {"a": 1, "b": 2}, {"a": 1, "b": 2}),
        (list[dict[str, list[int]]], [{"a": [1]}, {}], [{"a": [1]}, {}]),
        (dict[str, list[float | None]], {"a": [1, None]}, {"a": [1.0, None]}),
        (int | None, None, None),
        (Optional[int], 4, 4),  # noqa: UP045 (the spelling under test)
        (list[int] | None, [7], [7]),
        (list, [1, "a", None], [1, "a", None]),
        (dict, {"a": [1]}, {"a": [1]}),
        (bool, False, False),
        (float, 3, 3.0),
    ],
)
def test_validate_input_accepts_parameterised_types(tp, value, clean):
    result = one_field(tp).validate_input({"v": value})["v"]
    assert result == clean
    assert [type(x) for x in _leaves(result)] == [type(x) for x in _leaves(clean)]


def _leaves(value):
    if isinstance(value, list):
        return [leaf for item in value for leaf in _leaves(item)]
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in _leaves(value[key])]
    return [value]


@pytest.mark.parametrize(
    ("tp", "value", "problems"),
    [
        (list[int], [1, 2, "3"], ["field 'v'[2] must be int, got str"]),
        (list[int], (1, 2), ["field 'v' must be list[int], got tuple"]),
        (
            list[int],
            [True, 1.0],
            ["field 'v'[0] must be int, got bool", "field 'v'[1] must be int, got float"],
        ),
        (list[float], [1, False], ["field 'v'[1] must be float, got bool"]),
        (dict[str, int], {"a": 1, "b": 1.5}, ["field 'v'['b'] must be int, got float"]),
        (dict[str, int], {1: 1}, ["field 'v' has a key 1 that is not a str"]),
        (
            list[dict[str, list[int]]],
            [{"a": [1, "x"]}],
            ["field 'v'[0]['a'][1] must be int, got str"],
        ),
        (int | None, "1", ["field 'v' must be int | None, got str"]),
        (list[int | None], [None, "1"], ["field 'v'[1] must be int | None, got str"]),
        (int, True, ["field 'v' must be int, got bool"]),
        (float, True, ["field 'v' must be float, got bool"]),
        (float, float("nan"), ["field 'v' must be a finite number, got nan"]),
        (bool, 1, ["field 'v' must be bool, got int"]),
        (str, None, ["field 'v' must be str, got None"]),
        (dict, [], ["field 'v' must be dict, got list"]),
    ],
)
def test_validate_input_names_the_path_of_each_wrong_value(tp, value, problems):
    from runs.errors import InvalidInput

    with pytest.raises(InvalidInput) as excinfo:
        one_field(tp).validate_input({"v": value})
    assert excinfo.value.problems == problems


def test_validate_input_caps_the_problems_it_lists():
    from runs.errors import InvalidInput

    with pytest.raises(InvalidInput) as excinfo:
        one_field(list[int]).validate_input({"v": ["x"] * 25})
    assert excinfo.value.problems == [
        *(f"field 'v'[{i}] must be int, got str" for i in range(10)),
        "and 15 more problems",
    ]


def test_field_min_applies_to_floats_and_optional_numbers():
    from runs.errors import InvalidInput

    wf = Workflow(
        "t", 1, input={"x": Field(float, min=0.5), "n": Field(int | None, default=None, min=1)}
    )
    assert wf.validate_input({"x": 1}) == {"x": 1.0, "n": None}
    assert wf.validate_input({"x": 0.5, "n": 1}) == {"x": 0.5, "n": 1}
    with pytest.raises(InvalidInput) as excinfo:
        wf.validate_input({"x": 0.25, "n": 0})
    assert excinfo.value.problems == [
        "field 'x' must be at least 0.5, got 0.25",
        "field 'n' must be at least 1, got 0",
    ]


def test_input_defaults_are_copied_per_run():
    wf = one_field(list[int], default=[])
    first = wf.validate_input({})
    first["v"].append(1)
    assert wf.validate_input({}) == {"v": []}


@pytest.mark.parametrize(
    ("tp", "field", "message"),
    [
        (set[int], {}, "unsupported type set[int]; " + SUPPORTED),
        (tuple, {}, "unsupported type tuple; " + SUPPORTED),
        (tuple[int, ...], {}, "unsupported type tuple[int, ...]; " + SUPPORTED),
        (
            dict[int, str],
            {},
            "unsupported type dict[int, str] (JSON object keys are str); " + SUPPORTED,
        ),
        (int | str, {}, "unsupported type int | str; " + SUPPORTED),
        (Workflow, {}, "unsupported type Workflow; " + SUPPORTED),
        ("int", {}, "unsupported type 'int'; " + SUPPORTED),
        (list[set[int]], {}, "unsupported type set[int] in list[set[int]]; " + SUPPORTED),
        (
            dict[str, tuple[int]],
            {},
            "unsupported type tuple[int] in dict[str, tuple[int]]; " + SUPPORTED,
        ),
        (
            str,
            {"min": 1},
            "min= needs a number type (int, float, int | None, float | None), not str",
        ),
        (
            bool,
            {"min": 0},
            "min= needs a number type (int, float, int | None, float | None), not bool",
        ),
        (
            list[int],
            {"min": 0},
            "min= needs a number type (int, float, int | None, float | None), not list[int]",
        ),
        (int, {"default": "3"}, "default must be int, got str"),
        (list[int], {"default": [1, "2"]}, "default[1] must be int, got str"),
        (int, {"default": None}, "default must be int, got None"),
        (int, {"default": 0, "min": 1}, "default 0 is below min=1"),
    ],
)
def test_input_field_mistakes_are_refused_at_definition(tp, field, message):
    with pytest.raises(WorkflowDefinitionError) as excinfo:
        one_field(tp, **field)
    assert str(excinfo.value) == f"workflow 't' v1, input field 'v': {message}"


def test_describe_names_parameterised_types():
    wf = Workflow(
        "t",
        1,
        input={
            "ids": list[int],
            "scores": Field(dict[str, list[float | None]], default={}),
            "limit": Field(int, default=10, min=1),
        },
    )
    assert wf.describe()["input"] == {
        "ids": {"type": "list[int]", "required": True},
        "scores": {"type": "dict[str, list[float | None]]", "required": False, "default": {}},
        "limit": {"type": "int", "required": False, "default": 10, "min": 1},
    }


def test_input_schema_is_a_json_schema_of_the_input():
    wf = Workflow(
        "t",
        2,
        description="A test workflow.",
        input={
            "ids": list[int],
            "scores": Field(dict[str, list[float | None]], default={}),
            "note": Field(Optional[str], default=None),  # noqa: UP045
            "flags": Field(list, default=[]),
            "options": dict,
            "dry_run": Field(bool, default=False),
            "limit": Field(int, default=10, min=1),
            "ratio": Field(float, min=0.5),
        },
    )
    assert wf.input_schema() == {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "t v2 input",
        "description": "A test workflow.",
        "type": "object",
        "properties": {
            "ids": {"type": "array", "items": {"type": "integer"}},
            "scores": {
                "type": "object",
                "additionalProperties": {
                    "type": "array",
                    "items": {"type": ["number", "null"]},
                },
                "default": {},
            },
            "note": {"type": ["string", "null"], "default": None},
            "flags": {"type": "array", "default": []},
            "options": {"type": "object"},
            "dry_run": {"type": "boolean", "default": False},
            "limit": {"type": "integer", "default": 10, "minimum": 1},
            "ratio": {"type": "number", "minimum": 0.5},
        },
        "required": ["ids", "options", "ratio"],
        "additionalProperties": False,
    }


def test_input_schema_agrees_with_validate_input():
    """The published schema accepts and refuses what submission accepts and refuses
    (checked with jsonschema, which drf-spectacular already depends on)."""
    import jsonschema

    from runs.errors import InvalidInput

    wf = Workflow(
        "t",
        1,
        input={
            "ids": list[int],
            "groups": Field(dict[str, list[float | None]], default={}),
            "limit": Field(int, default=10, min=1),
        },
    )
    schema = wf.input_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    samples = [
        {"ids": [1, 2]},
        {"ids": [1], "groups": {"a": [1, 2.5, None]}, "limit": 1},
        {},
        {"ids": ["1"]},
        {"ids": [True]},
        {"ids": [], "limit": 0},
        {"ids": [], "groups": {"a": ["x"]}},
        {"ids": [], "groups": []},
        {"ids": [], "other": 1},
    ]
    for sample in samples:
        try:
            wf.validate_input(sample)
            accepted = True
        except InvalidInput:
            accepted = False
        assert validator.is_valid(sample) == accepted, sample


def test_examples_are_registered():
    known = {(w.name, w.version) for w in registry.all_workflows()}
    examples = {
        ("charge-payment", 1),
        ("merge-change", 1),
        ("merge-change-probed", 1),
        ("migrate-records", 1),
    }
    assert examples <= known


def test_fault_spec_parsing():
    assert faults.parse("after_effect:migrate:120, before_claim:charge") == {
        ("after_effect", "migrate"): 120,
        ("before_claim", "charge"): 1,
    }
    for bad in ("sometime:migrate", "after_effect", "after_effect:x:0"):
        with pytest.raises(ValueError, match="bad RUNS_FAULTS entry"):
            faults.parse(bad)


def test_faults_ignored_without_allow(monkeypatch):
    monkeypatch.setenv("RUNS_FAULTS", "before_claim:x")
    monkeypatch.delenv("RUNS_ALLOW_FAULTS", raising=False)
    faults.hit("before_claim", "x")  # would SIGKILL this test process if honoured
    assert faults.message_copies() == 1


def test_faults_armed_only_when_allowed_and_named(monkeypatch):
    """A map batch asks armed() once and skips its items' fault points when it is not."""
    monkeypatch.setenv("RUNS_FAULTS", "before_claim:x")
    monkeypatch.delenv("RUNS_ALLOW_FAULTS", raising=False)
    assert not faults.armed()
    monkeypatch.setenv("RUNS_ALLOW_FAULTS", "1")
    assert faults.armed()
    monkeypatch.setenv("RUNS_FAULTS", "")
    assert not faults.armed()
