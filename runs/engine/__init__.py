"""The engine: every write to the runs tables goes through these functions.

engine.submit(workflow=..., version=..., input=..., key=...)   # -> Submission
engine.cancel_run(run_id=..., actor=..., reason=...)
engine.execute_step(step_id=..., worker=...)      # the Celery task's body
engine.sweep()                                    # recovery (and timers due)
engine.send_signal(run_id=..., name=..., payload=..., actor=...)
engine.fire_due_schedules()                       # the beat: a run per schedule tick
"""

from .errors import (
    AttemptFenced,
    DuplicateSignal,
    EngineError,
    InvalidInput,
    InvalidSubmissionKey,
    RunNotActive,
    RunNotFound,
    SignalNotAllowed,
    StepNotRetryable,
    SubmissionKeyConflict,
    UnknownSignal,
    UnknownVersion,
    UnknownWorkflow,
    WaitFinished,
)
from .execute import execute_step
from .operate import RetryPlan, cancel_run, preview_retry, retry_steps
from .principals import Principal
from .probe import probe_claim
from .recover import recover_attempt, sweep
from .schedules import fire_due_schedules
from .submit import Submission, resolve_workflow, submit, submit_run
from .waits import send_signal

__all__ = [
    "AttemptFenced",
    "DuplicateSignal",
    "EngineError",
    "InvalidInput",
    "InvalidSubmissionKey",
    "Principal",
    "RetryPlan",
    "RunNotActive",
    "RunNotFound",
    "SignalNotAllowed",
    "StepNotRetryable",
    "Submission",
    "SubmissionKeyConflict",
    "UnknownSignal",
    "UnknownVersion",
    "UnknownWorkflow",
    "WaitFinished",
    "cancel_run",
    "execute_step",
    "fire_due_schedules",
    "preview_retry",
    "probe_claim",
    "recover_attempt",
    "resolve_workflow",
    "retry_steps",
    "send_signal",
    "submit",
    "submit_run",
    "sweep",
]
