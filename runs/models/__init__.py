"""The runs app's models, by idea: a run's state (core), what retention keeps and
records (retention), schedules (schedules). Import them from here."""

from .core import Attempt, Claim, Event, Run, RunSearchKey, Signal, Step, SubmissionKey
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
    "Claim",
    "Event",
    "MapRegistry",
    "RetentionPolicy",
    "RetentionPolicyChange",
    "RetentionPurge",
    "Run",
    "RunHistorySummary",
    "RunSearchKey",
    "Schedule",
    "Signal",
    "Step",
    "SubmissionKey",
]
