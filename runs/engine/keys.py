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
    run_id: uuid.UUID | str, step_name: str, plan_revision: int, input_digest: str | None = None
) -> str:
    key = f"{run_id}/{step_name}@{plan_revision}"
    return f"{key}#{input_digest}" if input_digest else key


def item_key(run_id: uuid.UUID | str, step_name: str, plan_revision: int, item: str) -> str:
    return f"{run_id}/{step_name}@{plan_revision}/{item}"


def digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
