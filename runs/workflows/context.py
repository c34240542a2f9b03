"""What a step's function receives while it runs: its Context, with the fencing token
of a guarded step and the collected results of a map step. The engine builds them for
each attempt; a workflow's declaration (definition.py) never holds one."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple


class FencingToken(NamedTuple):
    """Handed to guarded steps as `ctx.fencing_token`: the claim key plus the attempt
    number, which increases with every attempt of the same logical effect. An external
    system that remembers the highest `number` it has accepted per `key` can refuse a
    stale writer (a worker that was paused past its lease and woke up)."""

    key: str
    number: int

    def __str__(self) -> str:
        return f"{self.key}#{self.number}"


@dataclass
class Context:
    """What a step function receives. `results` maps the name of any earlier step of
    the run that completed (or was skipped: None) to its result, read when asked for;
    `collected` is set for a step declared with `collect=`."""

    run_id: str
    step_name: str
    input: dict[str, Any]
    results: Mapping[str, Any]
    idempotency_key: str | None
    attempt: int
    heartbeat: Callable[[], None]
    item: Any = None
    item_key: str | None = None
    # Guarded steps only (see FencingToken).
    fencing_token: FencingToken | None = None
    # Steps declared with collect=: the map step's per-item results, in item order.
    collected: Collected | None = None


class Collected:
    """A map step's per-item results in item order, read from its item registry (the
    item claims) one batch at a time, so a map of any size is never loaded at once.
    Iterate it (or `list()` it when it is small); `len()` is the number of items."""

    def __init__(self, fetch: Callable[[], Iterator[Any]], count: int) -> None:
        self._fetch, self._count = fetch, count

    def __iter__(self) -> Iterator[Any]:
        return self._fetch()

    def __len__(self) -> int:
        return self._count
