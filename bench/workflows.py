"""Workflows only the engine benchmark registers (bench/common.py adds this module to
RUNS_WORKFLOW_MODULES for its workers): chains of 10 steps of each kind that needs no
external system, and a fan-out/fan-in. Every step does (almost) nothing, so what is
measured is the engine's cost per step."""

from __future__ import annotations

from typing import Any

from runs.workflows import GUARDED, IDEMPOTENT, PURE, Context, Limit, Retry, workflow

CHAIN_LENGTH = 10
FAN_WIDTH = 20


def _chain(name: str, kind: str, limit: Limit | None = None) -> Any:
    wf = workflow(name, version=1, input={"n": int}, description=f"bench: 10 {kind} steps")
    for i in range(CHAIN_LENGTH):

        def step(ctx: Context, i: int = i) -> int:
            previous = ctx.results.get(f"s{i - 1}", ctx.input["n"]) if i else ctx.input["n"]
            return int(previous) + 1

        wf.step(kind=kind, name=f"s{i}", retry=Retry(max_attempts=3), limit=limit)(step)
    return wf


chain_pure = _chain("bench-chain-pure", PURE)
chain_idempotent = _chain("bench-chain-idempotent", IDEMPOTENT)
chain_guarded = _chain("bench-chain-guarded", GUARDED)
# The pure chain with a concurrency limit on every step that never binds: what taking
# a slot costs a start (docs/performance.md).
chain_limited = _chain("bench-chain-limited", PURE, limit=Limit(max=1000))

fan = workflow("bench-fan", version=1, input={"n": int}, description="bench: 1 -> 20 -> 1")


@fan.step(kind=PURE)
def split(ctx: Context) -> int:
    return int(ctx.input["n"])


for _i in range(FAN_WIDTH):

    def _part(ctx: Context, i: int = _i) -> int:
        return int(ctx.results["split"]) + i

    fan.step(kind=PURE, name=f"part{_i}", after=["split"])(_part)


@fan.step(kind=PURE, after=[f"part{i}" for i in range(FAN_WIDTH)])
def join(ctx: Context) -> int:
    return sum(int(v) for v in ctx.results.values())


# --- a step that fails while its process's environment says so (bench/backlog.py) ---
# The bench process sets BENCH_FAIL to make failed runs in-process; the workers, started
# without it, succeed when a bulk retry sends the step again.
BENCH_FAIL = "BENCH_FAIL"
flaky = workflow(
    "bench-flaky", version=1, input={"n": int}, description="bench: fails while flagged"
)


@flaky.step(kind=IDEMPOTENT, retry=Retry(max_attempts=1))
def call_service(ctx: Context) -> dict[str, Any]:
    import os

    if os.environ.get(BENCH_FAIL) == "1":
        raise ConnectionError("the service did not answer")
    return {"key": ctx.idempotency_key}
