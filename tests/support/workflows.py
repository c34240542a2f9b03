"""Workflows only the test suite registers (tests/support/session_env.py adds this module to
RUNS_WORKFLOW_MODULES). They give tests handles the examples do not: a guarded step
that raises on demand, steps that pause inside their effect, a second version.

Only workflows that real worker processes must know (a `workers`, `live` or browser
test, tests/integration, bench/) or that several test modules share belong here. A
workflow one in-process test module uses is declared in that module, next to its tests
(tests/support/declared.py)."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic import Field as PydanticField

from examples.fakes import CodeHost, PaymentAPI
from examples.models import Merge, TargetRecord
from runs.workflows import (
    GUARDED,
    IDEMPOTENT,
    PURE,
    TRANSACTIONAL,
    Context,
    Field,
    NotApplied,
    ProbeResult,
    Retry,
    workflow,
)

# --- a guarded step that fails as told ------------------------------------------------
flaky = workflow(
    "flaky-merge",
    version=1,
    input={"change_id": int, "mode": str},
    effects=lambda run_id: Merge.objects.filter(run_id=run_id).count(),
    expected_effects=lambda data: 1,
)


@flaky.step(kind=GUARDED, retry=Retry(max_attempts=3, base_delay=0.1, jitter=False))
def merge(ctx: Context) -> dict[str, Any]:
    mode = ctx.input["mode"]
    if mode == "timeout":
        raise TimeoutError("code host did not answer within 30s")
    if mode == "not_applied_once" and ctx.attempt == 1:
        raise NotApplied("code host refused the request before merging")
    return CodeHost().merge(change_id=ctx.input["change_id"], run_id=ctx.run_id)


# --- steps that hold still inside their effect, for SIGSTOP tests ----------------------
def _hold(ctx: Context) -> None:
    """Signal (by a file) that the effect is under way, then give the test time to stop us:
    `hold` seconds, or until the file named `release` exists (a test that must act while
    the step runs holds it for as long as it needs, however slow the machine)."""
    Path(ctx.input["marker"]).with_suffix(f".{ctx.attempt}").touch()
    release = Path(ctx.input["release"]) if ctx.input["release"] else None
    deadline = time.monotonic() + ctx.input["hold"]
    while time.monotonic() < deadline:
        if release is not None and release.exists():
            return
        time.sleep(0.05)


HOLD_INPUT = {"marker": str, "hold": float, "release": Field(str, default="")}
slow_write = workflow("slow-write", version=1, input=HOLD_INPUT)


@slow_write.step(kind=TRANSACTIONAL, retry=Retry(max_attempts=3))
def write(ctx: Context) -> dict[str, Any]:
    TargetRecord.objects.create(record_id=1, run_id=ctx.run_id)
    _hold(ctx)
    return {"written": 1}


slow_merge = workflow("slow-merge", version=1, input=HOLD_INPUT)


@slow_merge.step(kind=GUARDED)
def merge_slowly(ctx: Context) -> dict[str, Any]:
    result = CodeHost().merge(change_id=1, run_id=ctx.run_id)
    _hold(ctx)
    return result


# --- a transactional map item that heartbeats, then pauses -----------------------------
# PAUSES[run_id] = (paused, release): after its effect's write and ctx.heartbeat(), the
# item (or a step that calls write_heartbeat_pause, as tests/engine/test_heartbeat.py's
# does) sets `paused` and waits for `release`, inside its transaction, so a test can act
# (expire the lease, sweep) while a worker sits paused in an open transaction.
PAUSES: dict[str, tuple[threading.Event, threading.Event]] = {}


def write_heartbeat_pause(ctx: Context, record_id: int) -> None:
    TargetRecord.objects.create(record_id=record_id, run_id=ctx.run_id)
    ctx.heartbeat()
    paused, release = PAUSES[ctx.run_id]
    paused.set()
    release.wait(30)


heartbeat_map = workflow("heartbeat-map", version=1, input={})


@heartbeat_map.step(kind=PURE)
def one_item(ctx: Context) -> list[int]:
    return [7]


@heartbeat_map.map_step(over="one_item", batch_size=1, kind=TRANSACTIONAL)
def write_item_then_pause(ctx: Context, item: int) -> None:
    write_heartbeat_pause(ctx, item)


# --- a version only some workers know --------------------------------------------------
versioned = workflow("versioned", version=2, input={})


@versioned.step(kind=PURE)
def answer(ctx: Context) -> str:
    return "v2"


# --- a guarded step beside an independent branch, with a probe that cannot tell -------
def cannot_tell(ctx: Context) -> ProbeResult:
    return ProbeResult.unknown("code host audit log unavailable")


fan_out = workflow("fan-out", version=1, input={})


@fan_out.step(kind=GUARDED, after=[], probe=cannot_tell)
def deploy(ctx: Context) -> dict[str, Any]:
    raise TimeoutError("deploy API timed out")


@fan_out.step(kind=PURE, after=[])
def notify(ctx: Context) -> str:
    return "notified"


@fan_out.step(kind=PURE, after=["deploy"])
def announce(ctx: Context) -> str:
    return f"announced {ctx.results['deploy']}"


# --- two pure steps in a chain, counting how often the first one runs ------------------
CALLS: dict[str, int] = {}

chain = workflow("pure-chain", version=1, input={})


@chain.step(kind=PURE)
def first(ctx: Context) -> str:
    CALLS[ctx.run_id] = CALLS.get(ctx.run_id, 0) + 1
    return "first"


@chain.step(kind=PURE)
def second(ctx: Context) -> str:
    return f"second after {ctx.results['first']}"


# --- a chain whose next step a worker starts in the finish's transaction --------------
# held-chain: its middle step holds inside its effect, so a test can SIGKILL the worker
# while the step that started in `ready`'s finish transaction runs.
held_chain = workflow("held-chain", version=1, input=HOLD_INPUT)


@held_chain.step(kind=PURE)
def ready(ctx: Context) -> str:
    return "ready"


@held_chain.step(kind=PURE, after=["ready"])
def hold(ctx: Context) -> str:
    _hold(ctx)
    return f"held after {ctx.results['ready']}"


@held_chain.step(kind=PURE, after=["hold"])
def conclude(ctx: Context) -> str:
    return f"concluded after {ctx.results['hold']}"


# --- a guarded merge that lets a test act between the effect and its finish ------------
# HOOKS[run_id]() runs right after the merge, inside the step: a test uses it to make
# time pass (expire the lease), run the sweeper or resolve the claim, deterministically.
HOOKS: dict[str, Any] = {}

hooked = workflow("hooked-merge", version=1, input={"mode": str})


@hooked.step(kind=GUARDED, retry=Retry(max_attempts=3, base_delay=0.1, jitter=False))
def hooked_merge(ctx: Context) -> dict[str, Any]:
    if ctx.input["mode"] == "not_applied":  # the host refused: no merge
        HOOKS.pop(ctx.run_id, lambda: None)()
        raise NotApplied("the code host refused the merge: change is closed")
    result = CodeHost().merge(change_id=1, run_id=ctx.run_id)
    HOOKS.pop(ctx.run_id, lambda: None)()
    if ctx.input["mode"] == "raise":
        raise TimeoutError("code host did not answer")
    return result


# --- two independent pure steps (two running attempts per run) -------------------------
parallel = workflow("parallel-pure", version=1, input={})


@parallel.step(kind=PURE, after=[])
def left(ctx: Context) -> str:
    return "left"


@parallel.step(kind=PURE, after=[])
def right(ctx: Context) -> str:
    return "right"


# --- a guarded step left unresolved while an independent branch fails the run ---------
doomed = workflow("doomed-beside-guarded", version=1, input={})


@doomed.step(kind=GUARDED, after=[])
def deploy_now(ctx: Context) -> dict[str, Any]:
    raise TimeoutError("deploy API timed out")


@doomed.step(kind=PURE, after=[], retry=Retry(max_attempts=1))
def explode(ctx: Context) -> str:
    raise RuntimeError("this branch always fails")


@doomed.step(kind=PURE, after=["deploy_now"])
def after_deploy(ctx: Context) -> str:
    return "announced"


# --- a map step over any JSON items, each by its own key --------------------------------
def _record_item(ctx: Context, item: Any) -> None:
    """One target row per processed item, its payload the item's JSON (truncated)."""
    TargetRecord.objects.create(record_id=0, run_id=ctx.run_id, payload=json.dumps(item)[:100])


map_items = workflow(
    "map-items",
    version=1,
    input={"items": list, "batch_size": Field(int, default=10, min=1)},
)


@map_items.step(kind=PURE)
def list_items(ctx: Context) -> list[Any]:
    return ctx.input["items"]


@map_items.map_step(over="list_items", batch_size="batch_size", kind=TRANSACTIONAL)
def record(ctx: Context, item: Any) -> None:
    _record_item(ctx, item)


# --- a branch that fails for good beside one that goes on ------------------------------
fork = workflow("fork-fail", version=1, input={})


@fork.step(kind=PURE, after=[], retry=Retry(max_attempts=1))
def doomed_branch(ctx: Context) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("first attempt always fails")
    return "fixed"


@fork.step(kind=PURE, after=[])
def steady(ctx: Context) -> str:
    return "steady"


@fork.step(kind=PURE, after=["steady"])
def after_steady(ctx: Context) -> str:
    return "after steady"


# --- retention: a map whose listed items fail (no retry), leaving exceptions; and its
# twin under another name, so one test can purge two identical datasets two ways -------
def _copy_or_fail(ctx: Context, number: int) -> dict[str, int]:
    if number in ctx.input["fail"]:
        raise RuntimeError(f"item {number} fails")
    TargetRecord.objects.create(record_id=number, run_id=ctx.run_id)
    return {"copied": number}


def _list_numbers(ctx: Context) -> list[int]:
    return list(range(ctx.input["count"]))


for _name in ("map-some-fail", "map-some-fail-twin"):
    _wf = workflow(_name, version=1, input={"count": int, "fail": list, "batch_size": int})
    _wf.step(kind=PURE, name="list_numbers")(_list_numbers)
    _wf.map_step(
        over="list_numbers",
        batch_size="batch_size",
        kind=TRANSACTIONAL,
        retry=Retry(max_attempts=1),
        name="copy_or_fail",
    )(_copy_or_fail)


# --- typed input: a pydantic model declares and validates the input ----------------
class Address(BaseModel):
    city: str
    zip: str = PydanticField(pattern=r"^[0-9]{5}$")


class OrderInput(BaseModel):
    model_config = ConfigDict(extra="forbid")

    customer: str = PydanticField(min_length=1, description="who pays")
    amount: int = PydanticField(gt=0)
    currency: Literal["EUR", "USD"] = "EUR"
    express: bool = False
    note: str | None = None
    address: Address | None = None


typed_order = workflow("typed-order", version=1, input=OrderInput)


@typed_order.step(kind=PURE)
def total(ctx: Context) -> dict[str, Any]:
    return {"total": ctx.input["amount"] + (5 if ctx.input["express"] else 0)}


# --- authoring: waits and sleeps ---------------------------------------------------------
from datetime import timedelta  # noqa: E402

wait_approval = workflow("wait-approval", version=1, input={"order": int})


@wait_approval.step(kind=PURE)
def prepare(ctx: Context) -> dict[str, Any]:
    return {"order": ctx.input["order"]}


@wait_approval.wait(signal="approval", timeout=timedelta(seconds=4), on_timeout="fail")
def approval(ctx: Context) -> None:
    """Waits for a person's decision (its body is not called)."""


@wait_approval.step(kind=PURE)
def act(ctx: Context) -> dict[str, Any]:
    # `prepare` is not a direct dependency: ctx.results reaches any earlier step.
    return {"order": ctx.results["prepare"]["order"], "decision": ctx.results["approval"]}


wait_continue = workflow("wait-continue", version=1)


@wait_continue.wait(signal="nudge", timeout=timedelta(seconds=1), on_timeout="continue")
def nudge(ctx: Context) -> None:
    """Continues without the signal after a second."""


@wait_continue.step(kind=PURE)
def after_nudge(ctx: Context) -> Any:
    return ctx.results["nudge"]


queued_signals = workflow("queued-signals", version=1)


@queued_signals.wait(signal="tick", on_duplicate="queue")
def first_tick(ctx: Context) -> None:
    """Takes the first `tick`."""


@queued_signals.wait(signal="tick", on_duplicate="queue")
def second_tick(ctx: Context) -> None:
    """Takes the second `tick`."""


sleepy = workflow("sleepy", version=1, input={"seconds": float})


@sleepy.sleep(for_=lambda ctx: timedelta(seconds=ctx.input["seconds"]))
def nap(ctx: Context) -> None:
    """Sleeps for the input's seconds."""


@sleepy.step(kind=PURE)
def woke(ctx: Context) -> str:
    return "awake"


# --- compensation -----------------------------------------------------------------------
compensated = workflow(
    "compensated-order", version=1, input={"outcome": str, "undo": Field(str, default="ok")}
)


@compensated.compensation(kind=PURE)
def release(ctx: Context) -> dict[str, Any]:
    return {"released": ctx.results["reserve"]}


@compensated.compensation(kind=GUARDED, retry=Retry(max_attempts=1))
def refund(ctx: Context) -> dict[str, Any]:
    if ctx.input["undo"] == "uncertain":
        raise TimeoutError("the payment API did not answer the refund")
    return {"refunded": ctx.results["charge"]}


@compensated.step(kind=PURE, compensate="release")
def reserve(ctx: Context) -> str:
    return "seat-1"


@compensated.step(kind=PURE, compensate="refund")
def charge(ctx: Context) -> int:
    return 100


@compensated.wait(signal="go", when=lambda ctx: ctx.input["outcome"] == "wait")
def go(ctx: Context) -> None:
    """Only when told to wait: a run to cancel while it waits."""


@compensated.step(kind=PURE, retry=Retry(max_attempts=1))
def finish(ctx: Context) -> str:
    if ctx.input["outcome"] == "fail":
        raise RuntimeError("the order cannot be completed")
    return "done"


# --- a guarded step that names a compensation and whose outcome stays unknown ----------
compensated_deploy = workflow("compensated-deploy", version=1)


@compensated_deploy.compensation(kind=PURE)
def roll_back(ctx: Context) -> dict[str, Any]:
    return {"rolled_back": True}


@compensated_deploy.step(kind=GUARDED, compensate="roll_back", retry=Retry(max_attempts=1))
def deploy_release(ctx: Context) -> dict[str, Any]:
    raise TimeoutError("the deploy API did not answer")


@compensated_deploy.step(kind=PURE)
def announce_release(ctx: Context) -> str:
    return "announced"


# --- two branches: one fails for good at once, the other fails once and may retry -------
two_branches = workflow("two-failing-branches", version=1)


@two_branches.step(kind=PURE, after=[], retry=Retry(max_attempts=1))
def left_fails(ctx: Context) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("left fails on its first attempt")
    return "left"


@two_branches.step(kind=PURE, after=[], retry=Retry(max_attempts=3, base_delay=0, jitter=False))
def right_flaky(ctx: Context) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("right fails on its first attempt")
    return "right"


# --- one branch fails for good at once, an idempotent one beside it may retry ----------
idempotent_beside_failure = workflow("idempotent-beside-failure", version=1)


@idempotent_beside_failure.step(kind=PURE, after=[], retry=Retry(max_attempts=1))
def fails_at_first(ctx: Context) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("fails on its first attempt")
    return "fine"


@idempotent_beside_failure.step(
    kind=IDEMPOTENT, after=[], retry=Retry(max_attempts=3, base_delay=0, jitter=False)
)
def send_receipt(ctx: Context) -> str:
    return f"receipt sent under {ctx.idempotency_key}"


# --- a branch that waits, beside one that fails once -----------------------------------
wait_beside_failure = workflow("wait-beside-failure", version=1)


@wait_beside_failure.wait(signal="go_ahead", after=[])
def hold_for_go(ctx: Context) -> None:
    """Waits for its signal."""


@wait_beside_failure.step(kind=PURE, after=[], retry=Retry(max_attempts=1))
def fail_first(ctx: Context) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("fails on its first attempt")
    return "ok"


# --- a wait that a run's submitter (a service account) may signal ----------------------
submitter_nudge = workflow("submitter-nudge", version=1)


@submitter_nudge.wait(signal="nudge", signalled_by=("operators", "submitters"))
def nudged(ctx: Context) -> None:
    """The service that submitted the run says when to go on."""


@submitter_nudge.step(kind=PURE)
def went_on(ctx: Context) -> str:
    return "went on"


# --- a step that fails while the environment says so, for bulk retries -----------------
# The test process sets it to make failed runs; workers started with it set fail the
# retried step again, so a run retried twice would show it (two run_reopened events,
# three attempts).
FAIL_WHILE_FLAGGED = "RUNS_TEST_FAIL_STEP"
flagged = workflow("fails-while-flagged", version=1, input={"n": int})


@flagged.step(kind=IDEMPOTENT, retry=Retry(max_attempts=1))
def call_service(ctx: Context) -> dict[str, Any]:
    if os.environ.get(FAIL_WHILE_FLAGGED) == "1":
        raise ConnectionError("the service did not answer")
    return {"key": ctx.idempotency_key}


# --- search fields (docs/authoring.md#search-fields): a string and an optional int ------
search_order = workflow(
    "search-order",
    version=1,
    input={"order": str, "customer": Field(int | None, default=None), "note": str},
    search=("order", "customer"),
)


@search_order.step(kind=PURE)
def look(ctx: Context) -> dict[str, Any]:
    return {"order": ctx.input["order"]}


# --- an idempotent charge that names a refund, beside a seat that names a release -------
# A run to cancel (or fail) while the charge runs or waits for its retry. REFUNDS lists
# the charge results the refund undid, in order.
REFUNDS: list[Any] = []
refundable = workflow("refundable-charge", version=1, input={})


@refundable.compensation(kind=PURE)
def release_seat(ctx: Context) -> dict[str, Any]:
    return {"released": ctx.results["hold_seat"]}


@refundable.compensation(kind=IDEMPOTENT)
def refund_card(ctx: Context) -> dict[str, Any]:
    REFUNDS.append(ctx.results["charge_card"])
    return {"refunded": ctx.results["charge_card"]}


@refundable.step(kind=PURE, after=[], compensate="release_seat")
def hold_seat(ctx: Context) -> str:
    return "seat-7"


@refundable.step(
    kind=IDEMPOTENT,
    after=[],
    compensate="refund_card",
    retry=Retry(max_attempts=3, base_delay=0, jitter=False),
)
def charge_card(ctx: Context) -> dict[str, Any]:
    assert ctx.idempotency_key is not None
    return PaymentAPI().charge(amount=5, idempotency_key=ctx.idempotency_key)


@refundable.step(kind=PURE, after=["hold_seat", "charge_card"])
def confirm(ctx: Context) -> str:
    return "confirmed"


# --- two branches and their join: one fails the run, the other succeeds meanwhile -------
fork_join = workflow("fork-join", version=1, input={})


@fork_join.step(kind=PURE, after=[], retry=Retry(max_attempts=1))
def failing_branch(ctx: Context) -> str:
    if ctx.attempt == 1:
        raise RuntimeError("the first attempt fails")
    return "fixed"


@fork_join.step(kind=PURE, after=[])
def late_branch(ctx: Context) -> str:
    return "late"


@fork_join.step(kind=PURE, after=["failing_branch", "late_branch"])
def join(ctx: Context) -> str:
    return "joined"


# --- three steps, one trace (docs/operating.md#tracing) ---------------------------------
# traced-order: an idempotent step a test kills (`after_effect:charge`, the first step, so
# the killed worker has exported everything it ended before) and the engine retries, a
# pure one, and a guarded one whose effect times out, which leaves its claim unknown for
# an operator to resolve.
traced = workflow("traced-order", version=1, input={"order": int})


@traced.step(
    kind=IDEMPOTENT, name="charge", retry=Retry(max_attempts=3, base_delay=0.1, jitter=False)
)
def traced_charge(ctx: Context) -> dict[str, Any]:
    return {"order": ctx.input["order"], "charged": 700, "key": ctx.idempotency_key}


@traced.step(kind=PURE, name="pack")
def traced_pack(ctx: Context) -> dict[str, Any]:
    return {"parcel": ctx.results["charge"]["order"]}


@traced.step(kind=GUARDED, name="ship", retry=Retry(max_attempts=1))
def traced_ship(ctx: Context) -> dict[str, Any]:
    raise TimeoutError("the carrier did not answer within 30s")
