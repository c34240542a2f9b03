"""The engine: every write to the runs tables goes through these functions.

engine.submit_run(workflow=..., version=..., input=...)
engine.execute_step(step_id=..., worker=...)      # the Celery task's body
engine.sweep()                                    # recovery
"""

from .errors import AttemptFenced, EngineError, InvalidInput, UnknownVersion, UnknownWorkflow
from .execute import execute_step
from .probe import probe_claim
from .recover import recover_attempt, sweep
from .submit import resolve_workflow, submit_run

__all__ = [
    "AttemptFenced",
    "EngineError",
    "InvalidInput",
    "UnknownVersion",
    "UnknownWorkflow",
    "execute_step",
    "probe_claim",
    "recover_attempt",
    "resolve_workflow",
    "submit_run",
    "sweep",
]
