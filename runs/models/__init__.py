"""The runs app's models, by idea: a run's state (core), what retention keeps and
records (retention), schedules (schedules). Import them from here."""

from .batches import Batch, BatchItem
from .core import Attempt, Claim, Event, Run, Signal, Step, SubmissionKey
from .retention import (
    MapRegistry,
    RetentionPolicy,
    RetentionPolicyChange,
    RetentionPurge,
    RunHistorySummary,
)
from .schedules import Schedule

__all__ = [
    "Attempt",
    "Batch",
    "BatchItem",
    "Claim",
    "Event",
    "MapRegistry",
    "RetentionPolicy",
    "RetentionPolicyChange",
    "RetentionPurge",
    "Run",
    "RunHistorySummary",
    "Schedule",
    "Signal",
    "Step",
    "SubmissionKey",
]
