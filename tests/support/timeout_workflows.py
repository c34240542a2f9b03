"""Steps that hang, for the step-timeout tests (tests/integration/test_step_timeouts.py,
tests/engine/test_step_timeouts.py). Real worker processes import them
(tests/support/session_env.py), so they live here and not in a test module."""

from __future__ import annotations

import signal
import time
from typing import Any

from runs.workflows import GUARDED, PURE, Context, Retry, workflow

# A lease far longer than the timeout: the timeout, not a lease expiry, ends the attempt.
LEASE = 30.0
TIMEOUT = 2.0

hangs_once = workflow("hangs-once", version=1, input={"ignores_signals": bool})


@hangs_once.step(
    kind=PURE,
    timeout=TIMEOUT,
    lease_seconds=LEASE,
    retry=Retry(max_attempts=3, base_delay=0.1, jitter=False),
)
def hang(ctx: Context) -> dict[str, Any]:
    """Its first attempt hangs: interruptibly, or ignoring the stop (SIGALRM) as a call
    stuck in C code would. A later attempt returns at once."""
    if ctx.attempt == 1:
        if ctx.input["ignores_signals"]:
            signal.signal(signal.SIGALRM, signal.SIG_IGN)
        time.sleep(3600)
    return {"attempt": ctx.attempt}


hangs_guarded = workflow("hangs-guarded", version=1)


@hangs_guarded.step(kind=GUARDED, timeout=TIMEOUT, lease_seconds=LEASE)
def call_and_hang(ctx: Context) -> dict[str, Any]:
    """An irreversible call that never answers."""
    time.sleep(3600)
    return {}


quick = workflow("quick-one", version=1)


@quick.step(kind=PURE)
def done(ctx: Context) -> dict[str, Any]:
    return {"done": True}
