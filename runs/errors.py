"""Every refusal the engine makes, in one module, each with a stable `code`.

A refusal is an exception whose message a person can act on; nothing was written when
one is raised. `code` never changes once published: the API's error mapping, the pages
and scripts read it instead of the class's place in the code. The module sits below the
engine and the workflow definitions (which refuse input with InvalidInput), so both
raise from here, and every caller imports them from here: `runs.engine` hands none on
(docs/architecture.md#refusals).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar


class EngineError(Exception):
    """Base of every refusal the engine makes."""

    code: ClassVar[str] = "refused"


# -- submitting and operating runs --------------------------------------------


class UnknownWorkflow(EngineError):
    code = "unknown_workflow"

    def __init__(self, name: str, known: list[str]) -> None:
        hint = (
            f"; known workflows: {', '.join(known)}"
            if known
            else "; no workflow is registered on this server (RUNS_WORKFLOW_MODULES)"
        )
        super().__init__(f"unknown workflow {name!r}{hint}")
        self.name = name


class UnknownVersion(EngineError):
    code = "unknown_version"

    def __init__(self, name: str, version: int, known: list[int]) -> None:
        super().__init__(
            f"workflow {name!r} has no version {version}; known versions: "
            + ", ".join(str(v) for v in known)
        )
        self.name, self.version = name, version


class InvalidInput(EngineError):
    code = "invalid_input"

    def __init__(self, problems: list[str], by_field: dict[str, list[str]] | None = None) -> None:
        super().__init__("invalid input: " + "; ".join(problems))
        self.problems = problems
        # The problems of each top-level input field, for a form to show beside it.
        self.by_field = by_field or {}


class InvalidSubmissionKey(EngineError):
    code = "invalid_submission_key"


class InvalidDeadline(EngineError):
    """A submission's deadline that no run could meet: not a timezone-aware time, or not
    after the database's now (docs/authoring.md#deadlines)."""

    code = "invalid_deadline"


class SubmissionKeyConflict(EngineError):
    """The key was used before for a different request: the first one stands."""

    code = "submission_key_conflict"

    def __init__(self, key: str, run_id: object) -> None:
        super().__init__(
            f"idempotency key {key!r} was already used for a different request, which "
            f"created run {run_id}; use a new key for a new request"
        )
        self.key, self.run_id = key, run_id


class SubmitterUnknown(EngineError):
    """A run whose workflow waits for an approval (four eyes) submitted by nobody in
    particular (`manage.py submit_run` without --actor): no approval could be told apart
    from its submitter's own."""

    code = "submitter_unknown"

    def __init__(self, workflow: str, approvals: list[str]) -> None:
        super().__init__(
            f"workflow {workflow!r} waits for an approval ({', '.join(approvals)}) that must "
            "come from someone other than its submitter: name the submitter with --actor "
            "USERNAME"
        )
        self.workflow = workflow


class RunNotFound(EngineError):
    code = "run_not_found"

    def __init__(self, run_id: object) -> None:
        super().__init__(f"no run with id {run_id}")
        self.run_id = run_id


class RunNotActive(EngineError):
    """The run already finished (succeeded, failed or cancelled)."""

    code = "run_not_active"

    def __init__(self, run: object, doing: str = "cancelled") -> None:
        status = getattr(run, "status", "?")
        super().__init__(f"run {getattr(run, 'id', run)} is already {status}; it cannot be {doing}")
        self.run = run


class StepNotRetryable(EngineError):
    code = "step_not_retryable"


class WorkflowVersionUnknown(EngineError):
    """This process does not have the run's workflow version, and what was asked needs
    it (which steps to compensate, how many attempts a retry gets, what follows a
    resolution). Refused rather than read as "nothing to do": a process of the release
    that knows the version can do it (docs/reliability.md#version-skew)."""

    code = "workflow_version_unknown"

    def __init__(self, run: object, doing: str) -> None:
        name, version = getattr(run, "workflow", "?"), getattr(run, "version", "?")
        super().__init__(
            f"this process does not know workflow {name} v{version}, which run "
            f"{getattr(run, 'id', run)} runs, so it cannot {doing}; do it from a process "
            "of the release that has that version"
        )
        self.run = run


class InvalidBatch(EngineError):
    """A bulk operation refused before anything was written: an unknown operation, no
    reason, a filter the runs list refuses, or a selection that is empty or too large.
    `field` names the input at fault (operation, reason, filter or one of its fields)."""

    code = "invalid_batch"

    def __init__(self, message: str, field: str) -> None:
        super().__init__(message)
        self.field = field


class BatchSelectionRefused(InvalidBatch):
    """A well-formed filter that selects no run, or more than one batch takes: nothing
    is wrong with the request, but the batch cannot be made from what matches now."""

    code = "batch_selection_refused"


class UnknownPolicy(EngineError):
    """No retention policy by that name (or it is disabled)."""

    code = "unknown_policy"


class UnknownSignal(EngineError):
    """No wait step of the run's workflow listens for this signal."""

    code = "unknown_signal"

    def __init__(self, run_id: object, name: str, known: list[str]) -> None:
        listens = ", ".join(repr(k) for k in known) if known else "no signal at all"
        super().__init__(
            f"run {run_id} does not wait for signal {name!r}; its workflow waits for {listens}"
        )
        self.name = name


class SignalNotAllowed(EngineError):
    """The actor may not send this signal: its wait names who may (operators only, by
    default), or it is an approval that must come from someone other than the run's
    submitter."""

    code = "signal_not_allowed"


class WaitFinished(EngineError):
    """Every wait of the run for this signal has ended (timed out, was skipped by its
    condition, or took its signal): a new one would be kept forever and never read."""

    code = "wait_finished"

    def __init__(self, run_id: object, name: str, how: str) -> None:
        super().__init__(
            f"run {run_id} no longer waits for signal {name!r}: {how}; the signal was not sent"
        )
        self.name = name


class DuplicateSignal(EngineError):
    """A signal of this name was already received, and the wait takes only one."""

    code = "duplicate_signal"

    def __init__(self, run_id: object, name: str, actor: str, when: object) -> None:
        super().__init__(
            f"run {run_id} already received signal {name!r} (from {actor} at {when}); "
            "its wait takes one signal of that name and refuses the next"
        )
        self.name = name


# -- pausing and resuming (docs/operating.md#pause-and-resume) ----------------------


class PauseError(EngineError):
    """A pause or a resume refused; `field` names the input at fault, if one."""

    code = "pause_refused"
    field: ClassVar[str | None] = None


class PauseReasonRequired(PauseError):
    code = "pause_reason_required"
    field = "reason"

    def __init__(self, action: str) -> None:
        super().__init__(f"a {action} needs a reason: say why, for the audit")


class UnknownStep(PauseError):
    code = "unknown_step"
    field = "step"

    def __init__(self, workflow: str, step: str, known: list[str]) -> None:
        super().__init__(
            f"workflow {workflow!r} has no step {step!r} in any version; its steps: "
            + ", ".join(known)
        )
        self.workflow, self.step = workflow, step


class AlreadyPaused(PauseError):
    """Pausing what is paused is refused (not merged): the first pause's who and why stand."""

    code = "already_paused"

    def __init__(self, what: str, actor: str, when: datetime, reason: str) -> None:
        # To the second: the stored time's microseconds are noise to a person.
        super().__init__(
            f"{what} is already paused (by {actor} at {when:%Y-%m-%d %H:%M:%S %Z}: {reason})"
        )
        self.what, self.actor, self.when, self.reason = what, actor, when, reason


class NotPaused(PauseError):
    """No such pause: never made, or already resumed."""

    code = "not_paused"

    def __init__(self, pause_id: object) -> None:
        super().__init__(f"pause {pause_id} is not in effect (never made, or already resumed)")
        self.pause_id = pause_id


# -- attempts and claims ----------------------------------------------------------


class AttemptFenced(EngineError):
    """The attempt no longer owns its step (declared crashed, lease expired): its
    finish must change nothing (docs/architecture.md, "Fences")."""

    code = "attempt_fenced"


class ClaimBusy(EngineError):
    """Another open transaction holds this claim's key."""

    code = "claim_busy"


class ClaimNotTakeable(EngineError):
    """The step's claim succeeded, failed or is unresolved: the engine never takes it
    again (a retry after a failed resolution takes a new key)."""

    code = "claim_not_takeable"


class PostconditionFailed(Exception):
    """A step's verify() rejected its result: an error of the step, not a refusal.

    Its name is part of the error text an attempt records ("<module>.<class>: ..."),
    which the queue reads to say "the postcondition failed"; it keeps the module it was
    first recorded under, so rows written before the engine's layers moved still read
    the same."""

    __module__ = "runs.engine.execute"


# -- resolutions --------------------------------------------------------------------


class ResolutionError(EngineError):
    """A resolution was refused; the message says why, and nothing was changed."""

    code = "resolution_refused"


class ClaimNotFound(ResolutionError):
    code = "claim_not_found"


def resolved_as(claim: Any) -> str:
    when = claim.resolved_at.isoformat(timespec="seconds") if claim.resolved_at else "?"
    return f"resolved as {claim.status} by {claim.resolved_by} at {when}"


class ClaimAlreadyResolved(ResolutionError):
    """Someone resolved the claim first: who, when and what are in the message and on
    `claim` (resolved_by, resolved_at, status, resolution_note)."""

    code = "claim_already_resolved"

    def __init__(self, claim: Any) -> None:
        super().__init__(f"claim {claim.key} was already {resolved_as(claim)}")
        self.claim = claim


class ClaimNotUnresolved(ResolutionError):
    """Only an unresolved claim can be resolved (or taken, or probed: `doing`)."""

    code = "claim_not_unresolved"

    def __init__(self, claim: Any, *, doing: str = "resolved") -> None:
        state = resolved_as(claim) if claim.resolved_at else claim.status
        super().__init__(
            f"claim {claim.key} is {state}, not unresolved: only unresolved claims can be {doing}"
        )
        self.claim = claim


class InvalidResolution(ResolutionError):
    """A decision that cannot be applied as given. `field` names the input at fault
    ("outcome", "note", "result", "evidence", or on the operator side "reference",
    "claims"), so a form can show the message next to it; None if no one field is."""

    code = "invalid_resolution"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


# -- probes ------------------------------------------------------------------------


class ProbeError(EngineError):
    """An operator's "check again" was refused; nothing was asked or written."""

    code = "probe_refused"


class NoProbe(ProbeError):
    """The claim's step declares no probe: only an operator can decide."""

    code = "no_probe"


class ProbeNotDue(ProbeError):
    """The claim's probe_after is still ahead (on the database's clock)."""

    code = "probe_not_due"

    def __init__(self, claim: Any, until: datetime, seconds: float) -> None:
        super().__init__(
            f"claim {claim.key} cannot be probed before "
            f"{until.isoformat(timespec='seconds')} (in {seconds:.0f}s): its attempt's "
            "lease ended only recently, and a paused worker's effect may still land"
        )
        self.claim, self.until, self.seconds = claim, until, seconds


class ProbeInFlight(ProbeError):
    """Another probe holds the claim: its probe lease (database clock) has not passed."""

    code = "probe_in_flight"

    def __init__(self, claim: Any, until: datetime, seconds: float) -> None:
        super().__init__(
            f"claim {claim.key} is being probed: that probe holds it until "
            f"{until.isoformat(timespec='seconds')} (in {seconds:.0f}s); check again once "
            "it has answered, or after that time if it never does"
        )
        self.claim, self.until, self.seconds = claim, until, seconds
