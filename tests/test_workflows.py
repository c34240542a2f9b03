from __future__ import annotations

import pytest

from runs.engine import faults
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
