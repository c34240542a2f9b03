"""What the API reads and writes, and so what its OpenAPI schema says.

Request serializers check shapes and types only (and refuse unknown fields, so a typo
is not silently ignored); every rule about runs and claims is the service's, which
refuses with a domain error that api/errors.py turns into the error shape. Response
serializers describe read models (runs/reads/summaries.py, reconciliation/queries.py) and the
services' results.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from django.urls import reverse
from drf_spectacular.utils import extend_schema_field
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from rest_framework import serializers

from reconciliation.services import REFERENCE_MAX
from runs.record import export_shape
from runs.states import (
    RUN_OPERATION_CHOICES,
    AttemptStatus,
    BatchItemStatus,
    BatchOperation,
    BatchStatus,
    ClaimStatus,
    EffectKind,
    RunStatus,
    StepStatus,
)
from runs.workflows import registry
from runs.workflows.search import SEARCH_VALUE_MAX

from . import errors

INT32_MAX = 2**31 - 1


# A serializer's type parameter is the instance it reads; Any here, because a response
# serializer is given a list (many=True) as often as one object, and a request serializer
# none at all.


# --- reading requests ------------------------------------------------------------------
class StrictSerializer(serializers.Serializer[Any]):
    """Refuses fields it does not declare: `"verison": 2` must not mean "the latest"."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        unknown = sorted(set(data) - set(self.fields)) if isinstance(data, dict) else []
        if unknown:
            raise serializers.ValidationError({name: ["unknown field"] for name in unknown})
        return value


class StrictCharField(serializers.CharField):
    """A body's string: a number is refused, not read as its digits (the schema says
    string, so `"reason": 0` is not a reason)."""

    def to_internal_value(self, data: Any) -> Any:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictIntegerField(serializers.IntegerField):
    """A body's integer: a JSON integer, not a string of digits, a fraction or a bool
    (the schema says integer, so `"version": "2"` is not a version)."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


@extend_schema_field({"type": "string", "pattern": r"^[^\x00]*[^\s\x00][^\x00]*$"})
class NoteField(StrictCharField):
    """A note: blank once trimmed is no note (the service refuses it), and U+0000 is
    refused anywhere in it (PostgreSQL cannot store it: DRF's CharField refuses it). The
    pattern: "a character that is neither whitespace nor U+0000, somewhere, and no U+0000
    anywhere", with whitespace as Python's str.strip() sees it."""


@extend_schema_field({"type": "string", "nullable": True, "maxLength": REFERENCE_MAX})
class ReferenceField(StrictCharField):
    """A reference, measured as sent: the service trims it before its own check, so a
    long one padded with spaces would pass there while the schema's maxLength refuses it."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        if len(value) > REFERENCE_MAX:
            raise serializers.ValidationError(
                f"reference is {len(value)} characters long; at most {REFERENCE_MAX} "
                "(link to long evidence instead of pasting it)"
            )
        return value


class JSONValueField(serializers.JSONField):
    """Any JSON value PostgreSQL can store: no U+0000 in a string or a key (jsonb has no
    representation for it). The parser already refused lone surrogates and infinities."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        stack = [value]
        while stack:
            item = stack.pop()
            if isinstance(item, str) and "\x00" in item:
                raise serializers.ValidationError("strings cannot contain U+0000 (NUL)")
            if isinstance(item, dict):
                if any("\x00" in key for key in item):
                    raise serializers.ValidationError("keys cannot contain U+0000 (NUL)")
                stack.extend(item.values())
            elif isinstance(item, list):
                stack.extend(item)
        return value


@extend_schema_field({"type": "object", "additionalProperties": True})
class JSONObjectField(JSONValueField):
    """Documented as a JSON object; whether it must be one is the service's rule (the
    engine refuses a run input that is not an object, saying so)."""


class AwareDateTimeField(serializers.DateTimeField):
    """An ISO 8601 time with its offset (`2030-01-01T12:00:00Z`): one without is
    refused, never read in the server's zone."""

    default_error_messages = {
        "naive": "give the time with its offset or Z, e.g. 2030-01-01T12:00:00Z",
    }

    def to_internal_value(self, value: Any) -> datetime:
        if not isinstance(value, str):
            self.fail("invalid", format="ISO 8601")
        parsed = super().to_internal_value(value)
        try:
            given = datetime.fromisoformat(value.strip())
        except ValueError:
            given = parsed
        if given.utcoffset() is None:
            self.fail("naive")
        return parsed


class Submission(StrictSerializer):
    """A run to submit: which workflow (and version) with which input."""

    workflow = StrictCharField(max_length=100, help_text="A registered workflow's name.")
    version = StrictIntegerField(
        min_value=1,
        max_value=INT32_MAX,
        required=False,
        allow_null=True,
        help_text="The workflow's version; omitted or null: the latest.",
    )
    input = JSONObjectField(
        required=False,
        default=dict,
        help_text="The run's input, checked against the workflow's declared input "
        "(GET /api/workflows/ gives it as JSON Schema). Omitted: {}.",
    )
    deadline = AwareDateTimeField(
        required=False,
        allow_null=True,
        help_text="ISO 8601 with an offset, in the future: past it no new step starts and the "
        "run ends as a cancel would (docs/api.md#deadlines). The workflow's own deadline "
        "(`deadline_seconds`), when earlier, applies instead. Omitted or null: the "
        "workflow's, if any.",
    )


class Cancellation(StrictSerializer):
    """Why the run is cancelled (optional)."""

    reason = StrictCharField(
        max_length=2000, required=False, allow_blank=True, help_text="Why, for the run's history."
    )


class SignalBody(StrictSerializer):
    """A signal's payload (any JSON; optional)."""

    payload = JSONValueField(
        required=False, allow_null=True, help_text="Any JSON: the wait step's result holds it."
    )


class SignalSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    run = serializers.UUIDField(source="run_id")
    name = serializers.CharField()
    payload = serializers.JSONField(allow_null=True)
    actor = serializers.CharField()
    created_at = serializers.DateTimeField()
    consumed = serializers.SerializerMethodField()

    def get_consumed(self, obj: Any) -> bool:
        return obj.consumed_by_step_id is not None


FAILED_HAS_NO_RESULT = "a failed outcome has no result (the effect did not happen)"


class _DecisionNote(StrictSerializer):
    note = NoteField(
        error_messages={"blank": "a resolution needs a note saying why"},
        help_text="Why you decided so (required, not blank).",
    )
    reference = ReferenceField(
        required=False,
        allow_blank=True,
        allow_null=True,
        help_text="A link to the evidence (a URL, a ticket), at most 2000 characters.",
    )


class Decision(_DecisionNote):
    """What happened to an unresolved claim's effect, and why you say so. The schema
    describes it as one of SucceededDecision and FailedDecision, by `outcome`; this is
    their union, which the server reads, and its validate() keeps them apart."""

    outcome = serializers.ChoiceField(
        choices=[ClaimStatus.SUCCEEDED.value, ClaimStatus.FAILED.value],
        help_text="succeeded: the effect happened; failed: it did NOT happen (the step is "
        "retried under a new claim if attempts remain).",
    )
    result = JSONValueField(
        required=False,
        allow_null=True,
        help_text="The step's result, for a succeeded outcome (a failed one has none).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # Even `"result": null`: the failed body has no result field at all.
        if attrs["outcome"] == ClaimStatus.FAILED and "result" in attrs:
            raise serializers.ValidationError({"result": [FAILED_HAS_NO_RESULT]})
        return attrs


class SucceededDecision(_DecisionNote):
    """The effect happened: with its result, if any."""

    outcome = serializers.ChoiceField(
        choices=[ClaimStatus.SUCCEEDED.value], help_text="The effect happened."
    )
    result = JSONValueField(
        required=False, allow_null=True, help_text="The step's result (none: null)."
    )


class FailedDecision(_DecisionNote):
    """The effect did NOT happen: the step is retried under a new claim if attempts
    remain. No result."""

    outcome = serializers.ChoiceField(
        choices=[ClaimStatus.FAILED.value], help_text="The effect did not happen."
    )


class QueryParams(serializers.Serializer[Any]):
    """Query parameters. An empty value (`?status=`) is refused unless the field allows
    a blank string: it is not a status, a date or a number, and reading it as "any" would
    make the schema, which lists what each may be, untrue. Leaving it out means any."""

    EMPTY = "may not be empty: leave the parameter out instead"

    def to_internal_value(self, data: Any) -> Any:
        empty = {
            name: [self.EMPTY]
            for name, field in self.fields.items()
            if data.get(name) == "" and not getattr(field, "allow_blank", False)
        }
        if empty:
            raise serializers.ValidationError(empty)
        return super().to_internal_value(data)


class RunQuery(QueryParams):
    """GET /api/runs/ filters. created_after is inclusive, created_before exclusive."""

    ORDERINGS = [
        f"{sign}{field}"
        for field in ("created_at", "updated_at", "finished_at", "status", "workflow")
        for sign in ("", "-")
    ]

    status = serializers.ChoiceField(choices=RunStatus.choices, required=False)
    workflow = serializers.CharField(max_length=100, required=False, allow_blank=True)
    created_after = serializers.DateTimeField(
        required=False, help_text="ISO 8601; runs created at or after it."
    )
    created_before = serializers.DateTimeField(
        required=False, help_text="ISO 8601; runs created before it."
    )
    ordering = serializers.ChoiceField(
        choices=ORDERINGS, required=False, help_text="Default -created_at (newest first)."
    )
    # A declared search field (docs/api.md#finding-a-run-by-a-search-field): its choices
    # are the fields the registered workflows declare, read when the serializer is made
    # (so the schema lists them), and it comes with `value`.
    field = serializers.ChoiceField(
        choices=[],
        required=False,
        help_text="A search field some workflow declares (GET /api/workflows/ lists each "
        "version's `search`); with `value`: the runs whose field has that value. Alone it "
        "filters nothing.",
    )
    value = serializers.CharField(
        max_length=SEARCH_VALUE_MAX,
        required=False,
        help_text="The value to find, as text (an int as its digits), compared exactly: in "
        "`field`, or without `field` in any declared search field.",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choice = self.fields["field"]
        assert isinstance(choice, serializers.ChoiceField)
        choice.choices = list(registry.search_fields())


class ClaimQuery(QueryParams):
    status = serializers.ChoiceField(
        choices=ClaimStatus.choices,
        required=False,
        help_text="unresolved: the reconciliation queue, the longest waiting first.",
    )
    workflow = serializers.CharField(max_length=100, required=False, allow_blank=True)


# --- errors ----------------------------------------------------------------------------
class ErrorDetail(serializers.Serializer[Any]):
    code = serializers.ChoiceField(choices=list(errors.CODES), help_text="Stable, for programs.")
    message = serializers.CharField(help_text="For people.")
    # DRF's metaclass takes each declared field out of the class, so this does not
    # replace the serializer's own .fields, as the stubs take it to.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Problems by input name (a body field, a query parameter, or the "
        "Idempotency-Key header).",
    )


class Error(serializers.Serializer[Any]):
    error = ErrorDetail()


# --- runs ------------------------------------------------------------------------------
SUBMITTED_BY_HELP = export_shape.SUBMITTED_BY


DEADLINE_AT_HELP = (
    "The run's deadline (read-only): the earlier of its workflow's and its submission's; "
    "null: none. A run still active then is ended as a cancel would end it."
)


class RunSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    workflow = serializers.CharField()
    version = serializers.IntegerField()
    status = serializers.ChoiceField(choices=RunStatus.choices)
    error = serializers.SerializerMethodField(help_text="Why it failed or was cancelled.")
    submitted_by = serializers.CharField(help_text=SUBMITTED_BY_HELP)
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    deadline_at = serializers.DateTimeField(allow_null=True, help_text=DEADLINE_AT_HELP)

    @extend_schema_field({"type": "string", "nullable": True})
    def get_error(self, run: Any) -> str | None:
        return run.error or None


class BatchSummary(serializers.Serializer[Any]):
    name = serializers.CharField()
    key = serializers.CharField()
    kind = serializers.ChoiceField(choices=EffectKind.choices)
    status = serializers.ChoiceField(choices=StepStatus.choices)
    attempts = serializers.IntegerField(help_text="Attempts started.")
    error = serializers.CharField(allow_null=True)


class StepSummary(BatchSummary):
    batches = BatchSummary(many=True, required=False, help_text="A map step's batches.")
    items = serializers.DictField(
        child=serializers.IntegerField(),
        required=False,
        help_text="A map step's item claims, counted by status.",
    )


class RunClaim(serializers.Serializer[Any]):
    """A step's claim, or a map item's claim that is still open (in flight or
    unresolved); a map step counts all its item claims by status in `items`."""

    id = serializers.IntegerField()
    key = serializers.CharField()
    status = serializers.ChoiceField(choices=ClaimStatus.choices)
    step = serializers.CharField()
    kind = serializers.ChoiceField(choices=EffectKind.choices)
    item_key = serializers.CharField(
        allow_null=True, help_text="The map item it is for; null for a step's own claim."
    )


class RunDetailSerializer(serializers.Serializer[Any]):
    id = serializers.UUIDField()
    workflow = serializers.CharField()
    version = serializers.IntegerField()
    status = serializers.ChoiceField(choices=RunStatus.choices)
    input = JSONObjectField()
    result = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_null=True)
    plan_revision = serializers.IntegerField()
    submitted_by = serializers.CharField(help_text=SUBMITTED_BY_HELP)
    submitted_via = serializers.CharField(
        help_text="How: page, api-token, api-session, cli, schedule (empty: not recorded)."
    )
    created_at = serializers.DateTimeField()
    updated_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    deadline_at = serializers.DateTimeField(allow_null=True, help_text=DEADLINE_AT_HELP)
    compacted = serializers.BooleanField(
        help_text="Retention compacted the run (any of the three dates below is set)."
    )
    payloads_compacted_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When retention replaced its input and results by their sizes and digests.",
    )
    compacted_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When retention removed its events (a summary of them is kept).",
    )
    claims_purged_at = serializers.DateTimeField(
        allow_null=True,
        help_text="When its dedup window ended: its claims and submission keys were removed.",
    )
    steps = StepSummary(many=True, help_text="The plan's steps, map batches inside their step.")
    claims = RunClaim(
        many=True, help_text="The run's step claims (map items are counted in their step)."
    )


class AttemptSerializer(serializers.Serializer[Any]):
    number = serializers.IntegerField()
    status = serializers.ChoiceField(choices=AttemptStatus.choices)
    worker = serializers.CharField(allow_blank=True)
    started_at = serializers.DateTimeField()
    lease_expires_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)
    error = serializers.CharField(allow_blank=True)


class StepSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    key = serializers.CharField(help_text='Unique in the run: the name, or "name[i]" for a batch.')
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=EffectKind.choices)
    status = serializers.ChoiceField(choices=StepStatus.choices)
    # A declared field, taken out of the class (see ErrorDetail.fields): the field's own
    # .parent is untouched.
    parent = serializers.CharField(  # type: ignore[assignment]
        source="parent_key", allow_null=True, help_text="A batch's map step."
    )
    batch_index = serializers.IntegerField(allow_null=True)
    depends_on = serializers.ListField(child=serializers.CharField())
    plan_revision = serializers.IntegerField()
    attempt_count = serializers.IntegerField(source="attempts_started")
    max_attempts = serializers.IntegerField()
    result = serializers.JSONField(allow_null=True)
    error = serializers.CharField(allow_blank=True)
    created_at = serializers.DateTimeField()
    queued_at = serializers.DateTimeField(allow_null=True)
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    attempts = AttemptSerializer(many=True, source="attempt_set.all")


class EventSerializer(serializers.Serializer[Any]):
    seq = serializers.IntegerField()
    type = serializers.CharField()
    step = serializers.CharField(source="step_key", allow_null=True)
    attempt_number = serializers.IntegerField(allow_null=True)
    schema_version = serializers.IntegerField()
    payload = JSONObjectField()
    created_at = serializers.DateTimeField()


# --- claims ----------------------------------------------------------------------------
class TakeSerializer(serializers.Serializer[Any]):
    claim_id = serializers.IntegerField()
    taken_by = serializers.CharField()
    taken_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()


class ClaimSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField(source="claim_id")
    key = serializers.CharField(help_text="The effect's idempotency key.")
    status = serializers.ChoiceField(choices=ClaimStatus.choices)
    kind = serializers.ChoiceField(choices=EffectKind.choices)
    run_id = serializers.UUIDField()
    run_status = serializers.ChoiceField(choices=RunStatus.choices)
    workflow = serializers.CharField()
    version = serializers.IntegerField()
    step = serializers.CharField(help_text="The step's key.")
    step_name = serializers.CharField()
    attempt = serializers.IntegerField(allow_null=True, help_text="The attempt that held it.")
    attempts = serializers.IntegerField(help_text="The step's attempts started so far.")
    max_attempts = serializers.IntegerField()
    cause = serializers.CharField(
        allow_blank=True, help_text="worker_died, exception or postcondition."
    )
    reason = serializers.CharField(allow_blank=True)
    evidence = serializers.JSONField(allow_null=True)
    has_probe = serializers.BooleanField()
    probe_after = serializers.DateTimeField(allow_null=True)
    probed_at = serializers.DateTimeField(allow_null=True)
    unresolved_at = serializers.DateTimeField(allow_null=True)
    age_seconds = serializers.SerializerMethodField(
        help_text="Seconds since it became unresolved (database clock)."
    )
    stale = serializers.BooleanField()
    take = TakeSerializer(allow_null=True, help_text='A live take ("on it"), if any.')
    resolved_by = serializers.CharField(allow_blank=True)
    resolved_at = serializers.DateTimeField(allow_null=True)
    resolution_note = serializers.CharField(allow_blank=True)

    @extend_schema_field({"type": "number", "nullable": True})
    def get_age_seconds(self, row: Any) -> float | None:
        return row.age.total_seconds() if row.age is not None else None


class ResolvedClaim(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    key = serializers.CharField()
    status = serializers.ChoiceField(choices=ClaimStatus.choices)
    run_id = serializers.UUIDField()
    resolved_by = serializers.CharField()
    resolved_at = serializers.DateTimeField()
    resolution_note = serializers.CharField()
    result = serializers.JSONField(allow_null=True)
    evidence = serializers.JSONField(allow_null=True)


class ResolutionSerializer(serializers.Serializer[Any]):
    claim = ResolvedClaim()
    step_status = serializers.ChoiceField(choices=StepStatus.choices)
    run_status = serializers.ChoiceField(choices=RunStatus.choices)
    replayed = serializers.BooleanField(
        help_text="This very decision had already been recorded (a retried request): "
        "nothing was written this time."
    )


class ReleaseSerializer(serializers.Serializer[Any]):
    claim_id = serializers.IntegerField()
    released = serializers.BooleanField(help_text="False: you held no take of it.")


# --- pauses ----------------------------------------------------------------------------
class PauseBody(StrictSerializer):
    """What to pause, and why (docs/operating.md#pause-and-resume)."""

    workflow = StrictCharField(max_length=100, help_text="A registered workflow's name.")
    step = StrictCharField(
        max_length=100,
        required=False,
        allow_blank=True,
        default="",
        help_text="One step name of it (a map step holds all its batches); omitted or "
        "empty: the whole workflow.",
    )
    reason = NoteField(max_length=2000, help_text="Why, for the audit. Required, not blank.")


class ResumeBody(StrictSerializer):
    """Why the pause ends."""

    reason = NoteField(max_length=2000, help_text="Why, for the audit. Required, not blank.")


class PauseSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    workflow = serializers.CharField()
    step = serializers.CharField(help_text="The paused step's name; empty: the whole workflow.")
    actor = serializers.CharField(help_text="Who paused it.")
    reason = serializers.CharField()
    created_at = serializers.DateTimeField()


class ResumedSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField(source="pause.id", help_text="The pause that ended.")
    workflow = serializers.CharField(source="pause.workflow")
    step = serializers.CharField(source="pause.step")
    resumed_by = serializers.CharField(source="change.actor")
    reason = serializers.CharField(source="change.reason")
    resumed_at = serializers.DateTimeField(source="change.at")
    republished = serializers.IntegerField(
        source="change.republished",
        help_text="How many waiting steps were sent again (spread out at RUNS_RESUME_RATE "
        "a second).",
    )


# --- workflows -------------------------------------------------------------------------
class WorkflowLimit(serializers.Serializer[Any]):
    max = serializers.IntegerField(
        help_text="At most this many attempts running at once, now (an operator's override "
        "in the admin, else the declared max)."
    )
    per = serializers.CharField(
        allow_null=True, help_text="The input field with a set of slots per value; null: one set."
    )
    declared_max = serializers.IntegerField(help_text="The max the workflow declares.")
    overridden = serializers.BooleanField(help_text="True: an operator's max stands.")


class WorkflowRate(serializers.Serializer[Any]):
    starts = serializers.IntegerField(
        help_text="At most this many starts … (now: an operator's override, else declared)"
    )
    every = serializers.FloatField(help_text="… every this many seconds, evenly spaced.")
    per = serializers.CharField(
        allow_null=True, help_text="The input field with a rate per value; null: one rate."
    )
    declared = serializers.DictField(
        child=serializers.FloatField(), help_text="What the workflow declares: starts, every."
    )
    overridden = serializers.BooleanField(help_text="True: an operator's rate stands.")


class BreakerSerializer(serializers.Serializer[Any]):
    outcomes = serializers.IntegerField(
        help_text="Failed or unknown outcomes within the window that pause the step."
    )
    within_seconds = serializers.FloatField(help_text="The window, in seconds.")
    enabled = serializers.BooleanField(help_text="False: an operator switched it off.")
    overridden = serializers.BooleanField(
        help_text="True: an operator's values (the admin) stand instead of the declared ones."
    )
    declared = serializers.DictField(
        child=serializers.FloatField(),
        help_text="What the workflow declares: outcomes and within_seconds.",
    )


class WorkflowStep(serializers.Serializer[Any]):
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=EffectKind.choices)
    after = serializers.ListField(child=serializers.CharField(), help_text="Its dependencies.")
    map = serializers.BooleanField(help_text="A map step (one claim per item, in batches).")
    wait = serializers.CharField(
        required=False, help_text="A wait step: the signal it waits for ('sleep': a timer)."
    )
    signalled_by = serializers.ListField(
        child=serializers.ChoiceField(choices=["operators", "submitters"]),
        required=False,
        help_text="A wait step: the roles that may send its signal.",
    )
    four_eyes = serializers.BooleanField(
        required=False,
        help_text="A wait step: an approval, sent by someone other than the run's submitter.",
    )
    limits = WorkflowLimit(
        many=True,
        required=False,
        help_text="Its concurrency limits (docs/authoring.md#limits-and-holds), if any.",
    )
    rate = WorkflowRate(required=False, help_text="Its rate of starts, if it declares one.")
    hold = serializers.CharField(
        required=False,
        help_text="A guarded step's key hold: the input field whose value an unresolved "
        "claim holds in other runs.",
    )
    breaker = BreakerSerializer(
        required=False,
        help_text="Its breaker as it applies now (docs/operating.md#breakers); absent: none "
        "declared. Read-only: operators change it in the admin.",
    )


class WorkflowVersion(serializers.Serializer[Any]):
    version = serializers.IntegerField()
    description = serializers.CharField(allow_blank=True)
    steps = WorkflowStep(many=True)
    input_schema = serializers.DictField(help_text="The declared input, as JSON Schema.")
    search = serializers.ListField(
        child=serializers.CharField(),
        help_text="Its search fields: input fields GET /api/runs/?field=…&value=… filters on.",
    )
    limit = WorkflowLimit(
        required=False,
        help_text="A limit on all its steps' attempts at once, if it declares one.",
    )
    rate = WorkflowRate(required=False, help_text="A rate of all its steps' starts, if any.")
    deadline_seconds = serializers.FloatField(
        allow_null=True,
        help_text="Its declared deadline, in seconds from a run's submission; null: none.",
    )


class WorkflowSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    latest_version = serializers.IntegerField()
    versions = WorkflowVersion(many=True)


# --- a run's export (docs/api.md#run-export) ---------------------------------------------
# The document's one description is runs/record/export_shape.py: its serializers here are made
# from it, field by field, only to say it in the schema (the view answers the document
# as built).
def _export_field(info: FieldInfo) -> serializers.Field[Any, Any, Any, Any]:
    kwargs: dict[str, Any] = {"help_text": info.description} if info.description else {}
    annotation, metadata = info.annotation, list(info.metadata)
    if get_origin(annotation) in (Union, UnionType) and type(None) in get_args(annotation):
        (annotation,) = [a for a in get_args(annotation) if a is not type(None)]
        kwargs["allow_null"] = True
    if get_origin(annotation) is Annotated:
        annotation, *more = get_args(annotation)
        metadata += more
    choices = [m for m in metadata if isinstance(m, export_shape.Choices)]
    if choices:
        return serializers.ChoiceField(choices=list(choices[0].choices), **kwargs)
    if any(isinstance(m, export_shape.JSONObject) for m in metadata):
        return JSONObjectField(**kwargs)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _export_serializer(annotation)(**kwargs)
    if get_origin(annotation) is list:
        (item,) = get_args(annotation)
        if isinstance(item, type) and issubclass(item, BaseModel):
            return _export_serializer(item)(many=True, **kwargs)
        return serializers.ListField(child=serializers.CharField(), **kwargs)
    if get_origin(annotation) is dict:
        if get_args(annotation)[1] is int:
            kwargs["child"] = serializers.IntegerField()
        return serializers.DictField(**kwargs)
    simple: dict[Any, Any] = {
        int: serializers.IntegerField,
        uuid.UUID: serializers.UUIDField,
        datetime: serializers.DateTimeField,
        Any: serializers.JSONField,
    }
    if annotation is str:
        text = any(isinstance(m, export_shape.Text) for m in metadata)
        return serializers.CharField(allow_blank=text, **kwargs)
    return simple[annotation](**kwargs)  # type: ignore[no-any-return]


def _export_serializer(
    model: type[BaseModel], name: str | None = None
) -> type[serializers.Serializer[Any]]:
    fields = {field: _export_field(info) for field, info in model.model_fields.items()}
    made: type[serializers.Serializer[Any]] = type(
        name or model.__name__, (serializers.Serializer,), {"__module__": __name__, **fields}
    )
    return made


# Its enums are RunExportFormatEnum and RunExportVersionEnum (ENUM_NAME_OVERRIDES).
RunExportSerializer = _export_serializer(export_shape.RunExport, "RunExportSerializer")


# --- batches (bulk operations) -----------------------------------------------------------
class BatchFilter(StrictSerializer):
    """Which runs: the runs list's filter, the same one /runs/bulk/ takes (an absent or
    blank one matches any value), parsed by the list's own parser
    (runs/batches/selection.py), which refuses what the list refuses."""

    q = StrictCharField(
        required=False,
        allow_blank=True,
        help_text="The runs list's search box: a run id or its start (4 hex digits or "
        "more), a claim key, a submission key, or a declared search field's value.",
    )
    field = serializers.ChoiceField(
        choices=[],
        required=False,
        help_text="A search field some workflow declares (GET /api/workflows/ lists each "
        "version's `search`); with `value`: the runs whose field has that value. Alone it "
        "filters nothing.",
    )
    value = StrictCharField(
        required=False,
        allow_blank=True,
        help_text="The value to find in `field`, as text (an int as its digits), compared "
        "exactly; refused without `field`, as the runs list refuses it.",
    )
    status = serializers.ChoiceField(choices=RunStatus.choices, required=False)
    # In a JSON body a name is a string: 0 is refused, not read as "0".
    workflow = StrictCharField(max_length=100, required=False, allow_blank=True)
    created_after = serializers.DateTimeField(
        required=False, help_text="ISO 8601; runs created at or after it."
    )
    created_before = serializers.DateTimeField(
        required=False, help_text="ISO 8601; runs created before it."
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        choice = self.fields["field"]
        assert isinstance(choice, serializers.ChoiceField)
        choice.choices = list(registry.search_fields())


class BatchPreviewRequest(StrictSerializer):
    # A resolve batch is the reconciliation queue's (its filter selects claims): the
    # API's batches select runs.
    operation = serializers.ChoiceField(
        choices=RUN_OPERATION_CHOICES,
        help_text="cancel: every matching active run; retry: every failed step of every "
        "matching failed run.",
    )
    filter = BatchFilter(required=False, help_text="Which runs (default: every run).")


class BatchRequest(BatchPreviewRequest):
    reason = NoteField(
        error_messages={"blank": "a batch needs a reason"},
        help_text="Why (required, not blank): recorded on the batch and on every run it changes.",
    )


class BatchCounts(serializers.Serializer[Any]):
    total = serializers.IntegerField(help_text="Runs selected when it was created.")
    done = serializers.IntegerField(help_text="applied + refused + failed + set_aside.")
    applied = serializers.IntegerField()
    refused = serializers.IntegerField(help_text="The engine refused (a finished run, ...).")
    failed = serializers.IntegerField(help_text="An unexpected error; the run is unchanged.")
    set_aside = serializers.IntegerField(
        help_text="resolve: claims left to decide one by one (contradicting evidence, "
        "another operator's take); 0 otherwise."
    )


class BatchLinks(serializers.Serializer[Any]):
    self = serializers.URLField()
    items = serializers.URLField()
    page = serializers.URLField(help_text="The batch's page in the dashboard.")


class BatchSerializer(serializers.Serializer[Any]):
    id = serializers.IntegerField()
    operation = serializers.ChoiceField(choices=BatchOperation.choices)
    status = serializers.ChoiceField(choices=BatchStatus.choices)
    filter = serializers.CharField(
        help_text="The runs list's filter as a query string: /runs/?<filter> lists the runs "
        "it matches now (resolve: the reconciliation queue's, /reconciliation/?<filter>)."
    )
    outcome = serializers.CharField(
        help_text="resolve: what every claim is resolved as (succeeded, failed); empty otherwise."
    )
    reason = serializers.CharField(help_text="Why (resolve: the note every resolution carries).")
    created_by = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    counts = serializers.SerializerMethodField()
    links = serializers.SerializerMethodField()

    @extend_schema_field(BatchCounts)
    def get_counts(self, batch: Any) -> dict[str, int]:
        names = ("total", "done", "applied", "refused", "failed", "set_aside")
        return {k: getattr(batch, k) for k in names}

    @extend_schema_field(BatchLinks)
    def get_links(self, batch: Any) -> dict[str, str]:
        request = self.context["request"]
        return {
            "self": request.build_absolute_uri(reverse("api:batch", args=[batch.id])),
            "items": request.build_absolute_uri(reverse("api:batch-items", args=[batch.id])),
            "page": request.build_absolute_uri(reverse("runs:batch", args=[batch.id])),
        }


class BatchItemSerializer(serializers.Serializer[Any]):
    run_id = serializers.UUIDField()
    claim_id = serializers.IntegerField(
        allow_null=True, help_text="resolve: the claim the item decides; null otherwise."
    )
    status = serializers.ChoiceField(choices=BatchItemStatus.choices)
    message = serializers.CharField(help_text="What the engine did, or why it refused.")
    done_at = serializers.DateTimeField(allow_null=True)


class PreviewRefusal(serializers.Serializer[Any]):
    why = serializers.CharField()
    count = serializers.IntegerField()


class PreviewStep(serializers.Serializer[Any]):
    key = serializers.CharField()
    kind = serializers.ChoiceField(choices=EffectKind.choices)
    retry_key = serializers.CharField(help_text="The idempotency key its retry will use.")


class PreviewSample(serializers.Serializer[Any]):
    run_id = serializers.UUIDField()
    workflow = serializers.CharField()
    status = serializers.ChoiceField(choices=RunStatus.choices)
    steps = PreviewStep(many=True, help_text="A retry's steps (empty for a cancel).")
    effects_kept = serializers.IntegerField(help_text="Effects already done, not repeated.")
    refused = serializers.CharField(allow_null=True, help_text="Why the engine would refuse.")


class BatchPreviewSerializer(serializers.Serializer[Any]):
    operation = serializers.ChoiceField(choices=BatchOperation.choices)
    filter = serializers.CharField()
    matched = serializers.IntegerField(
        help_text="Runs matching, counted up to max_runs + 1 (see capped)."
    )
    capped = serializers.BooleanField(help_text="More than max_runs match: too many for a batch.")
    max_runs = serializers.IntegerField()
    applies = serializers.IntegerField(help_text="Runs the operation applies to, by status now.")
    refused = serializers.IntegerField()
    refusals = PreviewRefusal(many=True)
    sample = PreviewSample(many=True, help_text="The first runs it applies to.")
    sample_rest = serializers.IntegerField(help_text="Runs it applies to beyond the sample.")
