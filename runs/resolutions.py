"""What a claim's resolution returns and what its preview says, as plain data.

The rule itself (what an outcome does to the step and the run) is the engine's
(`runs/engine/policies/resolve.py`); these are its answers, below the engine so the
reconciliation queue, the API and the pages read them without reaching into it
(docs/architecture.md#the-engines-layers).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from runs.models import Claim

# Preview.action: what resolving would do, for machines (the pages style each one).
RESUMES = "resumes"  # succeeded: the step succeeds and the run goes on
FINISHES_RUN = "finishes_run"  # succeeded: it was the run's last unfinished step
RETRIES = "retries"  # failed: the step is retried under a new claim
FAILS_RUN = "fails_run"  # failed: no attempts remain, the step and the run fail
RECORDED_ONLY = "recorded_only"  # the run already finished: the outcome is only recorded
# succeeded, the run already finished, and the step names a compensation: it runs
COMPENSATES = "compensates"
NOT_UNRESOLVED = "not_unresolved"  # the claim is no longer (or never was) unresolved
REFUSED = "refused"  # the resolution would be refused (no such claim, workflow unknown)


@dataclass(frozen=True)
class Resolution:
    """What resolve_claim() did: the claim as resolved, and its step's and run's
    statuses afterwards."""

    claim: Claim
    step_status: str
    run_status: str
    # The claim was already resolved by this very decision (a double submit): nothing
    # was written this time; the statuses are the current ones.
    replayed: bool = False


@dataclass(frozen=True)
class Preview:
    """What resolving one claim with `outcome` would do, computed without writing: the
    facts only (`action`, `because` and the details); the sentences that say them are
    the pages' (reconciliation/wording.py, preview_summary)."""

    class Because(StrEnum):
        """Why a refused, left-out or recorded-only decision is so."""

        NO_CLAIM = "no_claim"  # refused: no claim with that id
        DECIDED_EARLIER = "decided_earlier"  # not_unresolved: an earlier entry decides it
        CLAIM_NOT_UNRESOLVED = "claim_not_unresolved"  # not_unresolved: resolved, or never was
        WORKFLOW_UNKNOWN = "workflow_unknown"  # refused: this process lacks the version
        STEP_GOES_ON = "step_goes_on"  # recorded_only: the step is no longer unresolved
        RUN_FINISHED = "run_finished"  # recorded_only: the run already ended

    claim_id: int
    outcome: str
    action: str
    because: Because | None = None
    claim_key: str = ""
    run_id: uuid.UUID | None = None
    workflow: str = ""
    version: int | None = None
    step: str = ""
    # The claim as it is (not_unresolved: what it became, who decided, when).
    claim_status: str = ""
    resolved_by: str = ""
    resolved_at: datetime | None = None
    # The run's status before the decision, and whether it had already ended (for the
    # step: docs/architecture.md#run-states).
    run_was: str = ""
    run_finished: bool = False
    # The step's and the run's statuses once the resolution is applied.
    step_status: str = ""
    run_status: str = ""
    # compensates: the step's compensation, which runs.
    compensation: str = ""
    # resumes: steps that would be queued, map steps that would expand into batches, and
    # dependents that still wait on other steps.
    ready: tuple[str, ...] = ()
    expands: tuple[str, ...] = ()
    waiting: tuple[str, ...] = ()
    # resumes / retries: the run leaves needs_reconciliation, or how many other claims
    # of the run stay unresolved.
    resumes: bool = False
    other_unresolved: int = 0
    # retries: the next attempt (counted against max_attempts) and its new claim;
    # fails_run: the attempts used.
    attempt: int | None = None
    max_attempts: int | None = None
    next_claim_key: str = ""
    attempts_used: int | None = None
