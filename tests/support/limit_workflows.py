"""Steps under concurrency limits and key holds (docs/authoring.md#limits-and-holds),
for tests/engine/test_concurrency_limits.py and tests/integration/test_limits_live.py.
Real worker processes import them (tests/support/session_env.py), so they live here
and not in a test module."""

from __future__ import annotations

import time
from typing import Any

from runs.workflows import GUARDED, PURE, Breaker, Context, Limit, Rate, Retry, workflow

limited = workflow("limited-three", version=1, input={"seconds": float})


@limited.step(kind=PURE, limit=Limit(max=3), retry=Retry(max_attempts=5, base_delay=0.1))
def work(ctx: Context) -> dict[str, Any]:
    """Holds its slot for `seconds`; says when it ran (this machine's clock)."""
    return _timed(ctx.input["seconds"])


per_change = workflow("one-per-change", version=1, input={"change_id": int, "seconds": float})


@per_change.step(kind=PURE, limit=Limit(per="change_id", max=1))
def apply(ctx: Context) -> dict[str, Any]:
    """One at a time per change; any number of changes at once."""
    return _timed(ctx.input["seconds"])


held_merge = workflow("held-merge", version=1, input={"change_id": int, "answers": bool})


@held_merge.step(kind=GUARDED, hold="change_id", retry=Retry(max_attempts=1))
def merge(ctx: Context) -> dict[str, Any]:
    """Merges a change on a code host; without an answer its outcome is unknown."""
    if not ctx.input["answers"]:
        raise TimeoutError("the code host did not answer the merge")
    return {"merged": ctx.input["change_id"]}


def _timed(seconds: float) -> dict[str, float]:
    began = time.time()
    time.sleep(seconds)
    return {"began": began, "ended": time.time()}


paced = workflow("paced", version=1, input={})


@paced.step(kind=PURE, rate=Rate(starts=5, every=1.0))
def tick(ctx: Context) -> dict[str, Any]:
    """At most 5 starts a second, however many workers."""
    return {}


tripping = workflow("tripping-charge", version=1, input={"fail": bool})


@tripping.step(kind=PURE, retry=Retry(max_attempts=1), breaker=Breaker(outcomes=3, within=600))
def charge(ctx: Context) -> dict[str, Any]:
    """Fails while the payment host is down; its breaker pauses it after 3 failures."""
    if ctx.input["fail"]:
        raise ConnectionError("the payment host is down")
    return {"charged": True}
