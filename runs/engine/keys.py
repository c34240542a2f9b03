"""Idempotency keys (DESIGN.md §3): stable per logical invocation.

Built from the run id, the step name, the plan revision in which the step entered the
plan (fixed for its life, so a later revision never changes an existing key), the item
key for map items and, where the step asks for it, a digest of its input.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from typing import Any


def step_key(
    run_id: uuid.UUID | str,
    step_name: str,
    plan_revision: int,
    input_digest: str | None = None,
    generation: int = 1,
) -> str:
    """`generation` > 1 only after a claim of this step was resolved as failed and the
    step retried: the resolved claim stays closed, the retry gets `…/retry-<n>`."""
    key = f"{run_id}/{step_name}@{plan_revision}"
    if input_digest:
        key = f"{key}#{input_digest}"
    return key if generation == 1 else f"{key}/retry-{generation}"


def item_key(run_id: uuid.UUID | str, step_name: str, plan_revision: int, item: str) -> str:
    return f"{run_id}/{step_name}@{plan_revision}/{item}"


def digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
