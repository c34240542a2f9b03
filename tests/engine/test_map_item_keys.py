"""Map item keys (docs/architecture.md#map-steps): each item of a collection has a key of its
own, stable,
bounded to fit its claim, and a collection whose items share a key is refused.

The runs are driven in-process (engine.execute_step inline, no worker)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from examples.models import TargetRecord
from runs import engine
from runs.engine.tools import keys
from runs.models import Claim, Run, Step
from runs.states import ClaimStatus, RunStatus, StepStatus
from runs.workflows import PURE, TRANSACTIONAL, Context, Workflow, WorkflowDefinitionError
from runs.workflows.definition import STEP_NAME_MAX
from tests.support.declared import declared

# A map whose items are named by a key function: each item's "id".
map_items_by_id = Workflow("map-items-by-id", version=1, input={"items": list})


@map_items_by_id.step(kind=PURE)
def list_items_by_id(ctx: Context) -> list[Any]:
    return ctx.input["items"]


@map_items_by_id.map_step(
    over="list_items_by_id", batch_size=2, kind=TRANSACTIONAL, key=lambda item: item["id"]
)
def record_by_id(ctx: Context, item: Any) -> None:
    TargetRecord.objects.create(record_id=0, run_id=ctx.run_id, payload=json.dumps(item)[:100])


_workflows = declared(map_items_by_id)

LONG_STRING_KEY = "sha256:c1c39929e0a84f72b92d4aebd344a2b00117f31296935b21fd7177c47e423123"


def run_inline(workflow: str, items: list) -> Run:
    """Submit a run and execute its queued steps in this process until none is left."""
    run = engine.submit_run(workflow=workflow, input={"items": items})
    while queued := list(
        Step.objects.filter(run=run, status=StepStatus.QUEUED)
        .order_by("id")
        .values_list("id", flat=True)
    ):
        for step_id in queued:
            engine.execute_step(step_id=step_id, worker="t")
    run.refresh_from_db()
    return run


def item_claims(run: Run) -> list[tuple[str, str, str]]:
    return sorted(
        Claim.objects.filter(run=run, item_key__isnull=False).values_list(
            "item_key", "key", "status"
        )
    )


# -- keys, without the database ----------------------------------------------------------
@pytest.mark.parametrize(
    ("item", "key"),
    [
        (1, "1"),
        ("1", '"1"'),
        (1.5, "1.5"),
        (True, "true"),
        (None, "null"),
        ([1, "a"], '[1,"a"]'),
        ({"name": "café", "id": 7, "tags": ["b", "a"]}, '{"id":7,"name":"café","tags":["b","a"]}'),
        ("y" * 126, '"' + "y" * 126 + '"'),  # 128 characters: kept as it is
        ("y" * 127, "sha256:714484319bb331664c537d4314f604cde8b612f1dc4f64a2500cd8f3d8fbdb14"),
        (
            {"text": "x" * 200, "id": 1},
            "sha256:a4d059f2e84182989b18125184eb932eefad91f69096a371d7228514c5b49e5f",
        ),
        ("x" * 500, LONG_STRING_KEY),
    ],
)
def test_item_key_is_canonical_json_or_its_digest(item, key):
    assert keys.key_of_item(item) == key


def test_item_key_from_a_key_function_is_its_string_bounded_the_same_way():
    assert keys.key_of_item({"id": 7}, lambda item: item["id"]) == "7"
    assert keys.key_of_item({"id": "a/b"}, lambda item: item["id"]) == "a/b"
    assert (
        keys.key_of_item({"id": "k" * 129}, lambda item: item["id"])
        == "sha256:9094034fb2d0ce2e407c9b260f2806ab2efb352e200722fd6296d9cf1cf7e6f5"
    )


def test_item_claim_key_always_fits_the_claim_columns():
    longest_item_key = "z" * keys.ITEM_KEY_MAX
    claim_key = keys.item_key(uuid.uuid4(), "s" * STEP_NAME_MAX, 2**31 - 1, longest_item_key)
    item_key_column = Claim._meta.get_field("item_key").max_length
    key_column = Claim._meta.get_field("key").max_length
    assert (keys.ITEM_KEY_MAX, len(claim_key)) == (128, 277)
    assert keys.ITEM_KEY_MAX <= item_key_column and len(claim_key) <= key_column
    assert Step._meta.get_field("name").max_length == STEP_NAME_MAX


def test_step_name_longer_than_the_claim_key_allows_is_refused():
    wf = Workflow("t", 1)
    with pytest.raises(WorkflowDefinitionError) as excinfo:
        wf.step(kind="pure", name="s" * 101)(lambda ctx: None)
    assert str(excinfo.value) == (
        f"t: step name {'s' * 101!r} is 101 characters long; at most 100 fit its claim keys"
    )


def test_map_step_key_argument_is_named_key():
    wf = Workflow("t", 1)
    wf.step(kind="pure", name="a")(lambda ctx: [])

    def by_id(item):
        return item["id"]

    wf.map_step(over="a", batch_size=2, kind="transactional", key=by_id, name="b")(
        lambda ctx, item: None
    )
    assert wf.steps["b"].key is by_id
    with pytest.raises(TypeError, match="item_key"):
        wf.map_step(over="a", batch_size=2, kind="transactional", item_key=by_id)


# -- keys in a run ------------------------------------------------------------------------
def test_map_items_equal_as_text_get_different_keys_and_both_run(db):
    run = run_inline("map-items", [1, "1"])

    assert run.status == RunStatus.SUCCEEDED
    assert item_claims(run) == [
        ('"1"', f'{run.id}/record@1/"1"', ClaimStatus.SUCCEEDED),
        ("1", f"{run.id}/record@1/1", ClaimStatus.SUCCEEDED),
    ]
    assert sorted(TargetRecord.objects.filter(run_id=run.id).values_list("payload", flat=True)) == [
        '"1"',
        "1",
    ]
    assert Step.objects.get(run=run, key="record").result == {"items": 2, "batches": 1}


def test_map_items_with_the_same_key_fail_the_step_and_the_run_naming_them(db):
    run = run_inline("map-items", [5, 7, 5])

    error = (
        "map step 'record': items [0] and [2] of the list from 'list_items' have the same "
        "key '5'; each item needs a key of its own (its claim): pass map_step(..., key=fn) "
        "to name items by what identifies them, or remove the duplicate"
    )
    step = Step.objects.get(run=run, key="record")
    assert (step.status, step.error) == (StepStatus.FAILED, error)
    assert (run.status, run.error) == (RunStatus.FAILED, error)
    assert Step.objects.filter(run=run, parent__isnull=False).count() == 0
    assert item_claims(run) == []
    assert TargetRecord.objects.filter(run_id=run.id).count() == 0


def test_map_item_longer_than_a_key_is_processed_under_its_digest(db):
    item = "x" * 500
    run = run_inline("map-items", [item, "short"])

    assert run.status == RunStatus.SUCCEEDED
    assert item_claims(run) == [
        ('"short"', f'{run.id}/record@1/"short"', ClaimStatus.SUCCEEDED),
        (LONG_STRING_KEY, f"{run.id}/record@1/{LONG_STRING_KEY}", ClaimStatus.SUCCEEDED),
    ]
    assert TargetRecord.objects.filter(run_id=run.id).count() == 2


def test_map_step_key_function_names_the_items(db):
    items = [{"id": "a", "v": 1}, {"id": 2, "v": 1}, {"id": "c" * 200, "v": 1}]
    run = run_inline(map_items_by_id.name, items)

    # the key function's 200-character result is bounded like any key: its digest
    long_key = "sha256:5e39abe881f543e1215902fe6309ea58521e6911e3af4fd241aea8a95322ae09"
    assert run.status == RunStatus.SUCCEEDED
    assert item_claims(run) == sorted(
        [
            ("2", f"{run.id}/record_by_id@1/2", ClaimStatus.SUCCEEDED),
            ("a", f"{run.id}/record_by_id@1/a", ClaimStatus.SUCCEEDED),
            (long_key, f"{run.id}/record_by_id@1/{long_key}", ClaimStatus.SUCCEEDED),
        ]
    )
    assert TargetRecord.objects.filter(run_id=run.id).count() == 3


def test_map_step_key_function_giving_two_items_one_key_fails_the_run(db):
    run = run_inline(map_items_by_id.name, [{"id": 7}, {"id": "8"}, {"id": "7"}])

    error = (
        "map step 'record_by_id': its key function gives items [0] and [2] of the list from "
        "'list_items_by_id' the same key '7'; each item needs a key of its own (its claim)"
    )
    assert (run.status, run.error) == (RunStatus.FAILED, error)
    assert Step.objects.get(run=run, key="record_by_id").status == StepStatus.FAILED
    assert item_claims(run) == []
    assert TargetRecord.objects.filter(run_id=run.id).count() == 0


def test_map_step_key_function_that_raises_fails_the_run_naming_the_item(db):
    run = run_inline(map_items_by_id.name, [{"id": 1}, {"name": "no id"}])

    error = (
        "map step 'record_by_id': its key function raised KeyError('id') on item [1] of "
        "the list from 'list_items_by_id'"
    )
    assert (run.status, run.error) == (RunStatus.FAILED, error)
    assert Step.objects.get(run=run, key="list_items_by_id").status == StepStatus.SUCCEEDED
    assert item_claims(run) == []
