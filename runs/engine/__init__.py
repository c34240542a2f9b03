"""The engine: every write to the runs tables goes through these functions.

engine.submit(workflow=..., version=..., input=..., key=...)   # -> Submission
engine.cancel_run(run_id=..., actor=..., reason=...)
engine.execute_step(step_id=..., worker=...)      # the Celery task's body
engine.sweep()                                    # recovery
"""

from .errors import (
    AttemptFenced,
    EngineError,
    InvalidInput,
    InvalidSubmissionKey,
    RunNotActive,
    RunNotFound,
    SubmissionKeyConflict,
    UnknownVersion,
    UnknownWorkflow,
)
from .execute import execute_step
from .operate import cancel_run
from .probe import probe_claim
from .recover import recover_attempt, sweep
from .submit import Submission, resolve_workflow, submit, submit_run

__all__ = [
    "AttemptFenced",
    "EngineError",
    "InvalidInput",
    "InvalidSubmissionKey",
    "RunNotActive",
    "RunNotFound",
    "Submission",
    "SubmissionKeyConflict",
    "UnknownVersion",
    "UnknownWorkflow",
    "cancel_run",
    "execute_step",
    "probe_claim",
    "recover_attempt",
    "resolve_workflow",
    "submit",
    "submit_run",
    "sweep",
]
