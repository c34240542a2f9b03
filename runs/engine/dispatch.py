"""Publishing step messages. A message is only a hint that a step may be ready
(DESIGN.md §6), so it goes out after commit, carries only the step id, and a lost one
is repaired by the sweeper."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from django.db import transaction

from . import faults

log = logging.getLogger(__name__)


def publish_now(step_ids: Iterable[int], countdown: float | None = None) -> None:
    from runs.tasks import execute_step

    for step_id in step_ids:
        for _ in range(faults.message_copies()):
            try:
                execute_step.apply_async((step_id,), countdown=countdown)
            except Exception:
                # The row says queued; the sweeper will republish it.
                log.exception("could not publish step %s; the sweeper will retry", step_id)


def publish_on_commit(
    step_ids: list[int],
    *,
    countdown: float | None = None,
    fault_step: str | None = None,
) -> None:
    """After the surrounding transaction commits, publish a message per step.

    `fault_step` marks the commit of that step's completion: the `after_commit` fault
    point fires between the commit and the publish."""

    def send() -> None:
        if fault_step is not None:
            faults.hit("after_commit", fault_step)
        publish_now(step_ids, countdown)

    transaction.on_commit(send)
