"""The runs app's models, by idea: a run's state (core), what retention keeps and
records (retention), schedules (schedules), the worker processes that report
themselves (workers), pauses (pauses). Import them from here."""

from .batches import Batch, BatchItem
from .core import Attempt, Claim, Event, Run, RunSearchKey, Signal, Step, SubmissionKey
from .identities import SignInIdentity
from .pauses import BreakerChange, BreakerSetting, Pause, PauseChange
from .retention import (
    MapRegistry,
    RetentionPolicy,
    RetentionPolicyChange,
    RetentionPurge,
    RunHistorySummary,
)
from .schedules import Schedule
from .slots import LimitChange, LimitSetting, RateChange, RateClock, RateSetting, Slot
from .workers import WorkerProcess

__all__ = [
    "Attempt",
    "Batch",
    "BatchItem",
    "BreakerChange",
    "BreakerSetting",
    "Claim",
    "Event",
    "LimitChange",
    "LimitSetting",
    "MapRegistry",
    "Pause",
    "PauseChange",
    "RateChange",
    "RateClock",
    "RateSetting",
    "RetentionPolicy",
    "RetentionPolicyChange",
    "RetentionPurge",
    "Run",
    "RunHistorySummary",
    "RunSearchKey",
    "Schedule",
    "SignInIdentity",
    "Signal",
    "Slot",
    "Step",
    "SubmissionKey",
    "WorkerProcess",
]
