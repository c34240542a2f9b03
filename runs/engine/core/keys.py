"""Idempotency keys (docs/architecture.md, "Effect kinds"): stable per logical invocation.

Built from the run id, the step name, the plan revision in which the step entered the
plan (fixed for its life, so a later revision never changes an existing key), the item
key for map items and, where the step asks for it, a digest of its input.

A map item's key is the canonical JSON of the item (keys sorted, no
spaces, non-ASCII kept), so `1` and `"1"` differ and the same item has the same key in
every process and every Python version; or, when the map step declares `key=fn`, the
string of fn(item). Past ITEM_KEY_MAX characters it is replaced by `sha256:<hex>` of
that text, so it always fits Claim.item_key and, with a step name of at most 100
characters (definition.STEP_NAME_MAX), the claim key `<run>/<step>@<revision>/<item key>`
fits Claim.key. An item's key is computed once, when its map step expands, and stored with
it in its batch.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from runs.models import Run, Step
    from runs.workflows.definition import StepDef

# Claim.key is varchar(300): 36 (run id) + 1 + 100 (step name) + 1 + 10 (revision, a
# positive int4) + 1 + 128 (item key) = 277. Claim.item_key is varchar(200).
ITEM_KEY_MAX = 128


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


def retry_key(key: str, generation: int) -> str:
    """The key the step's next claim takes after its claim `key`, of `generation`, was
    resolved as failed (what step_key gives at generation + 1)."""
    base = key.removesuffix(f"/retry-{generation}") if generation > 1 else key
    return f"{base}/retry-{generation + 1}"


def item_key(run_id: uuid.UUID | str, step_name: str, plan_revision: int, item: str) -> str:
    """The claim key of a map item, from its item key (key_of_item)."""
    return f"{run_id}/{step_name}@{plan_revision}/{item}"


def key_of_item(item: Any, key: Callable[[Any], Any] | None = None) -> str:
    """A map item's key: canonical JSON of the item, or str(key(item)); bounded."""
    text = str(key(item)) if key is not None else canonical_json(item)
    if len(text) <= ITEM_KEY_MAX:
        return text
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def step_claim_key(run: Run, step: Step, stepdef: StepDef) -> str:
    """The claim key of the step's logical invocation (docs/architecture.md, "Claims and keys")."""
    of_input = digest(run.input) if stepdef.key_includes_input else None
    return step_key(run.id, step.name, step.plan_revision, of_input, step.claim_generation)
