"""Workflows that `manage.py demo` runs to show what the dashboard is for: a probe that
cannot tell, a code host that answers after the step's lease has passed, and a code
host that refuses a merge. They use the same fake code host as merge-change
(examples.Merge), and are registered with the other examples so that the web process
and every worker know them: an operator can decide their claims from the pages."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from django.db.models.functions import Now

from runs.workflows import GUARDED, Context, Field, NotApplied, ProbeResult, Retry, workflow

from .fakes import MAX_ID, CodeHost
from .models import Merge

# How long the slow host may take to answer: a worker process sleeps for that long.
MAX_REPLY_SECONDS = 30.0

# The code host's merge log lists a merge this long after it happened: before that, a
# probe that reads the log can say neither yes nor no.
MERGE_LOG_LAG = timedelta(minutes=10)


def _merges(run_id: str) -> int:
    return Merge.objects.filter(run_id=run_id).count()


# --- merge-change-audited: a probe that may not be able to tell ----------------------
def read_merge_log(ctx: Context) -> ProbeResult:
    """Ask the code host's merge log (read-only). A merge it lists is certain; a merge
    it does not list yet may still have happened in the last MERGE_LOG_LAG."""
    listed = (
        Merge.objects.filter(
            change_id=ctx.input["change_id"],
            run_id=ctx.run_id,
            merged_at__lte=Now() - MERGE_LOG_LAG,
        )
        .order_by("id")
        .first()
    )
    if listed is not None:
        return ProbeResult.applied(
            {"merge_id": listed.id, "change_id": listed.change_id}, merge_id=listed.id
        )
    minutes = int(MERGE_LOG_LAG.total_seconds() // 60)
    return ProbeResult.unknown(
        f"the merge log lists merges {minutes} minutes after they happen: change "
        f"{ctx.input['change_id']} is not listed, which proves nothing yet",
        log_lag_minutes=minutes,
    )


merge_change_audited = workflow(
    "merge-change-audited",
    version=1,
    input={"change_id": Field(int, min=1, max=MAX_ID)},
    description="merge-change, with a probe that reads the code host's merge log, which "
    "lags: for a recent merge it cannot tell, and the claim waits for a person.",
    effects=_merges,
    expected_effects=lambda data: 1,
)


@merge_change_audited.step(
    kind=GUARDED, name="merge", probe=read_merge_log, retry=Retry(max_attempts=3)
)
def merge_audited(ctx: Context) -> dict[str, Any]:
    return CodeHost().merge(change_id=ctx.input["change_id"], run_id=ctx.run_id)


# --- merge-change-slow-host: the answer comes after the lease -------------------------
merge_change_slow_host = workflow(
    "merge-change-slow-host",
    version=1,
    input={
        "change_id": Field(int, min=1, max=MAX_ID),
        "reply_seconds": Field(float, default=6.0, min=0, max=MAX_REPLY_SECONDS),
    },
    description="merge-change on a code host that merges at once but answers "
    "`reply_seconds` later, past the step's 2-second lease: the engine has given the "
    "attempt up by then, so the answer is kept as evidence for a person.",
    effects=_merges,
    expected_effects=lambda data: 1,
)


@merge_change_slow_host.step(
    kind=GUARDED, name="merge", lease_seconds=2.0, retry=Retry(max_attempts=3)
)
def merge_slow_host(ctx: Context) -> dict[str, Any]:
    result = CodeHost().merge(change_id=ctx.input["change_id"], run_id=ctx.run_id)
    time.sleep(ctx.input["reply_seconds"])  # no ctx.heartbeat(): the lease runs out
    return result


# --- merge-change-checked: the host refuses, the run fails ---------------------------
merge_change_checked = workflow(
    "merge-change-checked",
    version=1,
    input={
        "change_id": Field(int, min=1, max=MAX_ID),
        "checks_pass": Field(bool, default=True),
    },
    description="merge-change on a code host that refuses to merge a change whose "
    "checks fail: a refusal is certain (nothing merged), so it is retried, then the run "
    "fails.",
    effects=_merges,
    expected_effects=lambda data: 1 if data["checks_pass"] else 0,
)


@merge_change_checked.step(
    kind=GUARDED, name="merge", retry=Retry(max_attempts=2, base_delay=0.5, jitter=False)
)
def merge_checked(ctx: Context) -> dict[str, Any]:
    if not ctx.input["checks_pass"]:
        raise NotApplied(
            f"the code host refused to merge change {ctx.input['change_id']}: its checks fail"
        )
    return CodeHost().merge(change_id=ctx.input["change_id"], run_id=ctx.run_id)
