"""What every log line carries: the request (id, user) or the step (run id, step key,
attempt number, worker) it was written for.

Fields are bound in a context variable (`log_context(...)`), so a log call anywhere
below a web request or a step attempt carries them without being passed them; a
logging filter (config/logs.py) copies them onto each record.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

_fields: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "durable_runs_log_fields", default=None
)


def current() -> dict[str, Any]:
    return _fields.get() or {}


@contextmanager
def log_context(**fields: Any) -> Iterator[None]:
    """Add fields to every log line written inside the block (None values are left out)."""
    token = _fields.set({**current(), **{k: v for k, v in fields.items() if v is not None}})
    try:
        yield
    finally:
        _fields.reset(token)


def bind(**fields: Any) -> None:
    """Add fields until the current context ends (the attempt's number, once known)."""
    _fields.set({**current(), **{k: v for k, v in fields.items() if v is not None}})


def payload(value: Any) -> Any:
    """A step's input, result or evidence as a log may show it: only its size, unless
    RUNS_LOG_PAYLOADS allows the value itself (payloads can hold personal data)."""
    if getattr(settings, "RUNS_LOG_PAYLOADS", False):
        return value
    return f"<{len(repr(value))} characters, not logged: RUNS_LOG_PAYLOADS=0>"
