"""The run export document, described once (docs/api.md#run-export): these pydantic
models are what runs/record/export.py dumps the document through, what the API's schema of
the export endpoint is made from (api/serializers.py), and where runs/record/export_check.py
reads the sections and their shapes from. The fields are declared in the order the
document has them.

Markers in `Annotated[...]` say what JSON Schema alone cannot: `Text` (a string that may
be empty), `Choices` (a closed set, as the schema lists it) and `JSONObject` (any JSON
value, documented as an object). A datetime is written as Python's isoformat() writes it
(`+00:00`, not pydantic's `Z`), as every export so far.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, get_origin

from pydantic import BaseModel, ConfigDict, Field, PlainSerializer

from runs.states import AttemptStatus, ClaimStatus, EffectKind, RunStatus, StepStatus

FORMAT = "durable-runs.run-export"
VERSION = 1
# What the API schema lists (RunExportFormatEnum, RunExportVersionEnum), as choices.
FORMATS = ((FORMAT, FORMAT),)
VERSIONS = ((VERSION, str(VERSION)),)


class Text:
    """A string that may be empty."""


class JSONObject:
    """Any JSON value, documented as an object."""


@dataclass(frozen=True)
class Choices:
    """One of these (value, label) pairs."""

    choices: Sequence[tuple[Any, str]]


def _iso(value: datetime) -> str:
    return value.isoformat()


When = Annotated[datetime, PlainSerializer(_iso, return_type=str)]
TextStr = Annotated[str, Text()]
Json = Any
SUBMITTED_BY = "Who submitted it: user:<username>, cli, schedule:<name>, or empty (not recorded)."


class _Shape(BaseModel):
    # A section's fields are exactly these: the builder cannot add one unnoticed.
    model_config = ConfigDict(extra="forbid")


class ExportRun(_Shape):
    id: uuid.UUID
    workflow: str
    version: int
    status: Annotated[str, Choices(RunStatus.choices)]
    input: Annotated[Json, JSONObject()] = Field(
        description="Compacted by retention: its size and sha256."
    )
    result: Json | None
    error: TextStr = Field(description="Why it failed or was cancelled (empty: it did not).")
    ends_as: TextStr = Field(description="While compensating: how it ends (cancelled or failed).")
    plan_revision: int
    last_seq: int = Field(description="Its last event's seq.")
    submitted_by: TextStr = Field(description=SUBMITTED_BY)
    submitted_via: TextStr = Field(
        description="page, api-token, api-session, cli, schedule (empty: not recorded)."
    )
    # Added to version 1 before its first release; a document written before has neither.
    on_behalf_of: list[TextStr] = Field(
        default_factory=list,
        description="A schedule's run: the people it acts for (its creator and last editors).",
    )
    created_at: When
    updated_at: When
    finished_at: When | None
    deadline_at: When | None = Field(
        default=None,
        description="The earlier of its workflow's and its submission's deadline (null: none).",
    )
    # Added to version 1 before its first release (migration runs 0042).
    traceparent: TextStr = Field(
        default="",
        description="The W3C traceparent its attempts' spans are children of (empty: none).",
    )
    retention_started_at: When | None = Field(description="When retention first touched it.")
    payloads_compacted_at: When | None = Field(
        description="Inputs and results replaced by sizes and digests."
    )
    compacted_at: When | None = Field(
        description="Events removed; history.summary keeps what they said."
    )
    claims_purged_at: When | None = Field(
        description="Claims, registries and submission keys removed."
    )


class ExportStep(_Shape):
    id: int
    key: str = Field(description='Unique in the run: the name, or "name[i]" for a batch.')
    name: str
    kind: Annotated[str, Choices(EffectKind.choices)]
    status: Annotated[str, Choices(StepStatus.choices)]
    depends_on: list[str]
    batch_index: int | None
    compensates: TextStr = Field(description="A compensation: the step it undoes.")
    plan_revision: int
    claim_generation: int
    attempts: int = Field(description="Attempts started.")
    deferred_attempts: int
    max_attempts: int
    result: Json | None
    error: TextStr
    created_at: When
    queued_at: When | None
    started_at: When | None
    finished_at: When | None
    wake_at: When | None = Field(description="A wait or sleep: when the sweeper wakes it.")
    next_attempt_at: When | None
    # Not columns of the step: its map step's key, and a batch's number of items.
    parent: str | None = Field(description="A batch's map step (its key).")
    item_count: int | None = Field(description="A batch's items.")


class ExportAttempt(_Shape):
    step: str = Field(description="Its step's key.")
    number: int
    status: Annotated[str, Choices(AttemptStatus.choices)]
    worker: TextStr
    started_at: When
    lease_expires_at: When
    effect_entered_at: When | None = Field(
        description="A guarded attempt: when it entered its effect."
    )
    # Added to version 1 before its first release (migration runs 0042).
    span_id: TextStr | None = Field(
        default=None, description="Its span's id, in its run's trace (null: not traced)."
    )
    finished_at: When | None
    error: TextStr


class ExportResolution(_Shape):
    outcome: Annotated[
        str, Choices([(s.value, s.value) for s in (ClaimStatus.SUCCEEDED, ClaimStatus.FAILED)])
    ]
    by: str = Field(description="Who decided: an operator, or `probe`.")
    at: When
    note: str = Field(description="Why.")
    evidence: Json | None = Field(
        description="What the decision rests on (a reference, a probe's answer)."
    )


class ExportClaim(_Shape):
    step: str = Field(description="Its step's key.")
    attempt: int | None = Field(description="The attempt that held it.")
    id: int
    key: str = Field(description="The effect's idempotency key.")
    item_key: str | None = Field(description="A map item's key.")
    kind: Annotated[str, Choices(EffectKind.choices)]
    status: Annotated[str, Choices(ClaimStatus.choices)]
    result: Json | None
    error: TextStr
    evidence: Json | None = Field(description="Cause, reason, probe answers.")
    created_at: When
    unresolved_at: When | None
    completed_at: When | None
    probe_requested_at: When | None
    probe_after: When | None
    probed_at: When | None
    probe_tries: int
    resolution: ExportResolution | None = Field(description="Null: nobody resolved it.")


class ExportRegistry(_Shape):
    step: str = Field(description="The map step's key.")
    items: int
    batch_size: int
    watermark: int = Field(description="Items numbered below it completed…")
    exceptions: list[str] = Field(description="…except these item keys.")
    updated_at: When


class ExportSignal(_Shape):
    id: int
    name: str
    payload: Json | None
    actor: str
    created_at: When
    consumed_at: When | None
    consumed_by: str | None = Field(description="The wait step that took it.")


class ExportSummary(_Shape):
    events_removed: int
    first_seq: int
    last_seq: int
    counts: dict[str, int] = Field(description="Removed events by type.")
    projection: dict[str, Json] = Field(
        description="What the removed events said of the run, its steps, claims and batches."
    )
    removed_at: When


class ExportEvent(_Shape):
    seq: int
    type: str
    step: str | None
    attempt_number: int | None
    schema_version: int
    payload: Annotated[Json, JSONObject()]
    created_at: When


class ExportHistory(_Shape):
    summary: ExportSummary | None = Field(
        description="What retention kept of the events it removed (seq 1..S)."
    )
    events: list[ExportEvent] = Field(description="The events there are (seq S+1..last_seq).")


class ExportCounts(_Shape):
    steps: int
    attempts: int
    claims: int
    item_claims: int
    signals: int
    events: int
    events_removed: int


class RunExport(_Shape):
    format: Annotated[str, Choices(FORMATS)]
    version: Annotated[int, Choices(VERSIONS)] = Field(
        description="The document's version: a reader refuses others."
    )
    exported_at: When = Field(description="The snapshot's instant (database clock).")
    exported_by: str = Field(description="user:<username> or cli.")
    run: ExportRun
    steps: list[ExportStep] = Field(description="In plan order, map batches included.")
    attempts: list[ExportAttempt]
    claims: list[ExportClaim] = Field(description="Step and map item claims alike.")
    registries: list[ExportRegistry] = Field(description="Compacted map registries.")
    signals: list[ExportSignal]
    history: ExportHistory
    counts: ExportCounts


def fields_of(model: type[BaseModel], *, but: tuple[str, ...] = ()) -> tuple[str, ...]:
    """A section's field names, in the document's order (`but`: those not read as
    columns of the same name)."""
    return tuple(name for name in model.model_fields if name not in but)


# The document's sections, in their order, each an object or a list of objects (what
# export_check holds a document to before anything else).
SECTIONS: dict[str, type] = {
    name: list if get_origin(RunExport.model_fields[name].annotation) is list else dict
    for name in fields_of(RunExport, but=("format", "version", "exported_at", "exported_by"))
}
