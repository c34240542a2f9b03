"""The engine's one door: everything outside runs/engine imports from here.

    engine.submit(workflow=..., version=..., input=..., key=...)   # -> Submission
    engine.cancel_run(run_id=..., actor=..., reason=...)
    engine.execute_step(step_id=..., worker=...)      # the Celery task's body
    engine.sweep()                                    # recovery (and timers due)
    engine.send_signal(run_id=..., name=..., payload=..., actor=...)
    engine.signal_refusal(run, name, actor)          # -> why it would be refused, or None
    engine.resolve_claim(claim_id=..., outcome=..., actor=..., note=...)
    engine.fire_due_schedules()                       # the beat: a run per schedule tick
    engine.queue_depths([name, ...])                  # -> ({name: messages} | None, error)
    engine.pause(workflow=..., step=..., actor=..., reason=...)   # -> Pause
    engine.resume(pause_id=..., actor=..., reason=...)            # -> Resumed

It holds the verbs and their result types, nothing else (docs/architecture.md, "The
engine's layers"). What they refuse is in runs/errors.py; principals and a resolution's
data are in runs/principals.py and runs/resolutions.py, below the engine. The hooks of
the tools and the tests (fault points, the hot statements, an attempt started by hand)
are behind a second door, runs.engine.tools, which only bench/, runs.tools.crashcheck,
runs.testing and tests/ may import.

Inside, five layers, each importing only those below it (`make lint` holds the code
to it):

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
"""

from .core import publish as _publish
from .core.clock import db_now_plus, lease_for
from .core.publish import queue_depths
from .core.timeouts import replace_hung_processes
from .entry.execute import execute_step
from .policies import retention
from .policies.operate import (
    RetryPlan,
    cancel_run,
    preview_retry,
    preview_retry_run,
    retry_run,
    retry_steps,
)
from .policies.pauses import Resumed, pause, resume, step_names
from .policies.probe import ProbeOutcome, probe_claim, reprobe_claim
from .policies.recover import SweepReport, sweep
from .policies.resolve import (
    claim_resolved,
    preview_resolution,
    preview_resolutions,
    resolve_claim,
    validate_outcome,
    validate_resolution,
)
from .policies.schedules import FireReport, fire_due_schedules, prepare_for_save
from .policies.submit import KEY_PATTERN, Submission, resolve_workflow, submit, submit_run
from .policies.waits import send_signal, signal_refusal
from .state.unresolved import probe_of


def send_task(task: str, arg: int, countdown: float | None = None) -> None:
    """Publish one message for the Celery task named `task` with its one argument (a
    batch's id, for `runs.process_batch`), after `countdown` seconds if given; the
    settings' routes pick its queue. Returns nothing; a broker that refuses raises
    what kombu raises. It calls the publisher at call time, so runs.testing's in-memory
    transport (which replaces it) sees these messages too."""
    _publish.send(task, arg, countdown)


__all__ = [
    "KEY_PATTERN",
    "FireReport",
    "ProbeOutcome",
    "Resumed",
    "RetryPlan",
    "Submission",
    "SweepReport",
    "cancel_run",
    "claim_resolved",
    "db_now_plus",
    "execute_step",
    "fire_due_schedules",
    "lease_for",
    "pause",
    "prepare_for_save",
    "preview_resolution",
    "preview_resolutions",
    "preview_retry",
    "preview_retry_run",
    "probe_claim",
    "probe_of",
    "queue_depths",
    "replace_hung_processes",
    "reprobe_claim",
    "resolve_claim",
    "resolve_workflow",
    "resume",
    "retention",
    "retry_run",
    "retry_steps",
    "send_signal",
    "send_task",
    "signal_refusal",
    "step_names",
    "submit",
    "submit_run",
    "sweep",
    "validate_outcome",
    "validate_resolution",
]
