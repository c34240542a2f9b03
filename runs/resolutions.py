"""What a claim's resolution returns and what its preview says, as plain data.

The rule itself (what an outcome does to the step and the run) is the engine's
(`runs/engine/policies/resolve.py`); these are its answers, below the engine so the
reconciliation queue, the API and the pages read them without reaching into it
(docs/architecture.md#the-engines-layers).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

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
    """What resolving one claim with `outcome` would do, computed without writing:
    `action` for machines, `summary` (one sentence) for people, and the details."""

    claim_id: int
    outcome: str
    action: str
    summary: str
    claim_key: str = ""
    run_id: uuid.UUID | None = None
    workflow: str = ""
    step: str = ""
    # The step's and the run's statuses once the resolution is applied.
    step_status: str = ""
    run_status: str = ""
    # resumes: steps that would be queued, and map steps that would expand into batches.
    ready: tuple[str, ...] = ()
    expands: tuple[str, ...] = ()
    # retries: the next attempt (counted against max_attempts) and its new claim.
    attempt: int | None = None
    max_attempts: int | None = None
    next_claim_key: str = ""
