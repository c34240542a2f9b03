"""What a step reads of its run: ctx.results (any earlier step's result, read when
asked for) and ctx.collected (a map step's per-item results, in item order, read from
its item registry one page of batches at a time)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Mapping
from typing import Any

from runs.engine.core import keys
from runs.models import Claim, Step
from runs.states import ClaimStatus, StepStatus
from runs.workflows import Collected, Context, StepDef

DONE = (StepStatus.SUCCEEDED, StepStatus.SKIPPED)


# Batches read per query when iterating a map step's item results.
COLLECT_PAGE_BATCHES = 20


class RunResults(Mapping[str, Any]):
    """The results of the run's completed top-level steps, by name (a skipped step's
    is None). `preloaded` (the step's dependencies) is read up front; any other step is
    read when first asked for, by the (run, name) index, and kept."""

    def __init__(self, run_id: uuid.UUID | str, preloaded: dict[str, Any] | None = None) -> None:
        self._run_id = run_id
        self._cache: dict[str, Any] = dict(preloaded or {})

    def _done(self) -> Any:
        return Step.objects.filter(run_id=self._run_id, parent__isnull=True, status__in=DONE)

    def __getitem__(self, name: str) -> Any:
        if name in self._cache:
            return self._cache[name]
        row = self._done().filter(name=name).values_list("result", flat=True)
        found = list(row[:1])
        if not found:
            raise KeyError(f"step {name!r} has not completed in run {self._run_id}")
        self._cache[name] = found[0]
        return found[0]

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._done().order_by("id").values_list("name", flat=True)))

    def __len__(self) -> int:
        return int(self._done().count())

    def __repr__(self) -> str:
        return f"RunResults({self._run_id}, read so far: {sorted(self._cache)})"


def collected(run_id: uuid.UUID | str, map_step: str) -> Collected:
    """The per-item results of map step `map_step` of the run, in item order."""
    parent = Step.objects.only("id", "plan_revision", "result").get(
        run_id=run_id, name=map_step, parent__isnull=True
    )
    count = int((parent.result or {}).get("items", 0))

    def fetch() -> Iterator[Any]:
        after = -1
        while True:
            page = list(
                Step.objects.filter(parent_id=parent.id, batch_index__gt=after)
                .order_by("batch_index")
                .values_list("batch_index", "items")[:COLLECT_PAGE_BATCHES]
            )
            if not page:
                return
            after = int(page[-1][0] or 0)
            item_keys = [pair["key"] for _, items in page for pair in items or []]
            claim_keys = {
                k: keys.item_key(run_id, map_step, parent.plan_revision, k) for k in item_keys
            }
            results = dict(
                Claim.objects.filter(
                    key__in=list(claim_keys.values()), status=ClaimStatus.SUCCEEDED
                ).values_list("key", "result")
            )
            for k in item_keys:
                yield results.get(claim_keys[k])

    return Collected(fetch, count)


def dependency_results(run_id: uuid.UUID, stepdef: StepDef) -> dict[str, Any]:
    """The results of the step's dependencies, by name: read up front for ctx.results
    (which reads any other earlier step when asked for it)."""
    return dict(
        Step.objects.filter(run_id=run_id, name__in=stepdef.after, parent__isnull=True).values_list(
            "name", "result"
        )
    )


def context_for(run_id: uuid.UUID, run_input: dict[str, Any], step_name: str) -> Context:
    """A context for the engine's own calls into a definition (conditions, deadlines):
    no idempotency key, no attempt, no heartbeat."""
    return Context(
        run_id=str(run_id),
        step_name=step_name,
        input=run_input,
        results=RunResults(run_id),
        idempotency_key=None,
        attempt=0,
        heartbeat=lambda: None,
    )
