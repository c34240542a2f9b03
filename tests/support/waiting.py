"""Waiting on the database (or anything else a test can read), never on a sleep: poll
until the condition holds, and say what was awaited when it never does."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def wait_for(
    predicate: Callable[[], Any],
    *,
    timeout: float = 60,
    what: str = "condition",
    on_timeout: Callable[[], str] | None = None,
) -> Any:
    """Poll `predicate` (a database read) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            extra = on_timeout() if on_timeout else ""
            raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{extra}")
        time.sleep(0.1)
