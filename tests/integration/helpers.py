from __future__ import annotations

from typing import Any

from runs.models import Run
from runs.states import RUN_FINISHED, RunStatus
from tests.support.waiting import wait_for

from .harness import Cluster

SETTLED = (*RUN_FINISHED, RunStatus.NEEDS_RECONCILIATION)


def wait_settled(
    run: Run, cluster: Cluster, timeout: float = 90, until: tuple[str, ...] = SETTLED
) -> Run:
    """Wait until the run is finished or waits for a human (or any status in `until`);
    return it fresh."""

    def settled() -> Any:
        run.refresh_from_db()
        return run.status in until

    wait_for(settled, timeout=timeout, what=f"run {run.id} to settle", on_timeout=cluster.logs)
    return run
