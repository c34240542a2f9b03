"""The engine's one door: everything outside runs/engine imports from here.

    engine.submit(workflow=..., version=..., input=..., key=...)   # -> Submission
    engine.cancel_run(run_id=..., actor=..., reason=...)
    engine.execute_step(step_id=..., worker=...)      # the Celery task's body
    engine.sweep()                                    # recovery (and timers due)
    engine.send_signal(run_id=..., name=..., payload=..., actor=...)
    engine.resolve_claim(claim_id=..., outcome=..., actor=..., note=...)
    engine.fire_due_schedules()                       # the beat: a run per schedule tick
    engine.queue_depths([name, ...])                  # -> ({name: messages} | None, error)
    engine.pause(workflow=..., step=..., actor=..., reason=...)   # -> Pause
    engine.resume(pause_id=..., actor=..., reason=...)            # -> Resumed

Inside, five layers, each importing only those below it (docs/architecture.md, "The
engine's layers"; `make lint` holds the code to it):

    entry/      where work comes in: a step's message (execute_step)
    policies/   what the engine decides around attempts: recovery, probes, resolutions,
                waits and signals, operators' actions, pauses, submissions, schedules,
                retention
    attempts/   an attempt's life: its start, its lease, its claims, its finish, a
                batch's items
    state/      the run's state: its status and end, what a success makes ready, map
                expansion, conditions, compensation, unresolved claims, results
    core/       what everything stands on: claim keys, the clock, JSON checks, the SQL
                loader, locks, fault points, publishing messages by name

Every refusal is in runs/errors.py, each with a stable `code`, and handed on here; so
are principals (runs/principals.py) and a resolution's data (runs/resolutions.py).
"""

from runs.errors import (
    AlreadyPaused,
    AttemptFenced,
    BatchSelectionRefused,
    ClaimAlreadyResolved,
    ClaimBusy,
    ClaimNotFound,
    ClaimNotTakeable,
    ClaimNotUnresolved,
    DuplicateSignal,
    EngineError,
    InvalidBatch,
    InvalidInput,
    InvalidResolution,
    InvalidSubmissionKey,
    NoProbe,
    NotPaused,
    PauseError,
    PauseReasonRequired,
    PostconditionFailed,
    ProbeError,
    ProbeInFlight,
    ProbeNotDue,
    ResolutionError,
    RunNotActive,
    RunNotFound,
    SignalNotAllowed,
    StepNotRetryable,
    SubmissionKeyConflict,
    SubmitterUnknown,
    UnknownPolicy,
    UnknownSignal,
    UnknownStep,
    UnknownVersion,
    UnknownWorkflow,
    WaitFinished,
    WorkflowVersionUnknown,
)
from runs.principals import Principal, actor_name, shown, user_principal
from runs.resolutions import (
    COMPENSATES,
    FAILS_RUN,
    FINISHES_RUN,
    NOT_UNRESOLVED,
    RECORDED_ONLY,
    REFUSED,
    RESUMES,
    RETRIES,
    Preview,
    Resolution,
)

from .attempts import finish as _finish
from .attempts import start as _start
from .attempts.lease import renew_lease
from .core import faults, publish
from .core.clock import db_now_plus, lease_for
from .core.faults import SimulatedCrash
from .core.publish import queue_depths
from .entry.execute import execute_step, start_attempt
from .policies import retention
from .policies.operate import (
    RetryPlan,
    cancel_run,
    preview_retry,
    preview_retry_run,
    retry_run,
    retry_steps,
)
from .policies.pauses import Holding, Resumed, holding, pause, resume, step_names
from .policies.probe import ProbeOutcome, probe_claim, reprobe_claim
from .policies.recover import recover_attempt, sweep
from .policies.resolve import (
    claim_resolved,
    preview_resolution,
    preview_resolutions,
    resolve_claim,
    validate_outcome,
    validate_resolution,
)
from .policies.schedules import fire_due_schedules, prepare_for_save
from .policies.submit import KEY_PATTERN, Submission, resolve_workflow, submit, submit_run
from .policies.waits import send_signal, wake_due
from .state.unresolved import probe_of

# The hot path's two statements as PostgreSQL receives them, for tools that EXPLAIN them
# (bench/scale.py --explain) without reaching past this door.
HOT_STATEMENTS = {
    "start": _start.SQL["start"],
    "finish": _finish.SQL["succeed_and_dependents"],
}

__all__ = [
    "COMPENSATES",
    "FAILS_RUN",
    "FINISHES_RUN",
    "HOT_STATEMENTS",
    "KEY_PATTERN",
    "NOT_UNRESOLVED",
    "RECORDED_ONLY",
    "REFUSED",
    "RESUMES",
    "RETRIES",
    "AlreadyPaused",
    "AttemptFenced",
    "BatchSelectionRefused",
    "ClaimAlreadyResolved",
    "ClaimBusy",
    "ClaimNotFound",
    "ClaimNotTakeable",
    "ClaimNotUnresolved",
    "DuplicateSignal",
    "EngineError",
    "Holding",
    "InvalidBatch",
    "InvalidInput",
    "InvalidResolution",
    "InvalidSubmissionKey",
    "NoProbe",
    "NotPaused",
    "PauseError",
    "PauseReasonRequired",
    "PostconditionFailed",
    "Preview",
    "Principal",
    "ProbeError",
    "ProbeInFlight",
    "ProbeNotDue",
    "ProbeOutcome",
    "Resolution",
    "ResolutionError",
    "Resumed",
    "RetryPlan",
    "RunNotActive",
    "RunNotFound",
    "SignalNotAllowed",
    "SimulatedCrash",
    "StepNotRetryable",
    "Submission",
    "SubmissionKeyConflict",
    "SubmitterUnknown",
    "UnknownPolicy",
    "UnknownSignal",
    "UnknownStep",
    "UnknownVersion",
    "UnknownWorkflow",
    "WaitFinished",
    "WorkflowVersionUnknown",
    "actor_name",
    "cancel_run",
    "claim_resolved",
    "db_now_plus",
    "execute_step",
    "faults",
    "fire_due_schedules",
    "holding",
    "lease_for",
    "pause",
    "prepare_for_save",
    "preview_resolution",
    "preview_resolutions",
    "preview_retry",
    "preview_retry_run",
    "probe_claim",
    "probe_of",
    "publish",
    "queue_depths",
    "recover_attempt",
    "renew_lease",
    "reprobe_claim",
    "resolve_claim",
    "resolve_workflow",
    "resume",
    "retention",
    "retry_run",
    "retry_steps",
    "send_signal",
    "shown",
    "start_attempt",
    "step_names",
    "submit",
    "submit_run",
    "sweep",
    "user_principal",
    "validate_outcome",
    "validate_resolution",
    "wake_due",
]
