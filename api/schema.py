"""The OpenAPI description of each operation (drf-spectacular): request and response
bodies, parameters, headers, and every 4xx it can answer, all in the error shape.

Kept apart from the views so that each view reads as what it does; each decorator here
is the whole contract of one operation.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, TypeVar

from drf_spectacular.extensions import OpenApiSerializerExtension
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    PolymorphicProxySerializer,
    extend_schema,
)
from rest_framework.serializers import Serializer

from runs.engine import KEY_PATTERN, step_names

from . import serializers as s
from .errors import IDEMPOTENCY_KEY_HEADER


class StrictSerializerSchema(OpenApiSerializerExtension):
    """A request body the server refuses unknown fields of (a typo is not ignored) says
    so: `additionalProperties: false`."""

    target_class = "api.serializers.StrictSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> Any:
        schema = auto_schema._map_serializer(self.target, direction, bypass_extensions=True)
        return {**schema, "additionalProperties": False}


ERRORS = {
    400: "The request is invalid: `fields` names each input at fault (body fields, "
    "query parameters, the Idempotency-Key header). Codes: malformed_json, invalid, "
    "unknown_workflow, unknown_version, invalid_input, invalid_idempotency_key, unknown_step.",
    401: "Not authenticated (not_authenticated), or a wrong, expired or revoked token "
    "(authentication_failed; the message says when a token expired).",
    403: "Authenticated, without the role this needs (permission_denied), or a session "
    "request without its CSRF token.",
    404: "No such object, or no such page (not_found).",
    406: "The Accept header asks for something other than JSON (not_acceptable).",
    409: "Refused in the current state; the message says why and, where someone else "
    "decided first, who and when.",
    413: "The body is over the size limit, API_MAX_BODY_BYTES (request_too_large).",
    415: "The body is not application/json (unsupported_media_type).",
    429: "Too many requests (throttled); Retry-After says when to try again.",
}
CONFLICTS = {
    "runs_create": "idempotency_key_conflict: the Idempotency-Key was used for a different "
    "request (the message names the run it created).",
    "runs_cancel": "run_not_active: the run already finished (succeeded, failed or cancelled); "
    "workflow_version_unknown: steps succeeded and this server lacks the run's workflow "
    "version, so it cannot tell which to compensate.",
    "runs_signal": "run_not_active: the run already finished; duplicate_signal: a signal "
    "of that name was already received and its wait refuses a second (whether or not it "
    "took the first); wait_finished: no wait of the run can take the signal any more "
    "(each timed out, was skipped by its condition, or took the signals it queues).",
    "runs_retry_step": "run_not_active: the run did not fail; refused: no such failed step, "
    "or other failed steps must be retried with it; workflow_version_unknown: this server "
    "lacks the run's workflow version.",
    "claims_resolve": "claim_already_resolved (who, when, what), claim_not_unresolved, "
    "workflow_version_unknown (succeeded: what follows is the definition's), refused.",
    "claims_take": "claim_taken (by whom, until when), claim_not_unresolved.",
    "claims_release": "claim_taken: another operator holds it.",
    "pauses_create": "already_paused: that workflow (or step) is paused already (the "
    "message says by whom, when and why).",
    "pauses_resume": "not_paused: no such pause in effect (never made, or resumed already).",
    "batches_create": "batch_selection_refused: the filter matches no run, or more than "
    "`max_runs` (the preview says how many it matches).",
}
# Every operation can answer these.
COMMON = (401, 403, 406, 429)
# And every one that reads a body these.
BODY = (400, 413, 415)

RESPONSE_HEADERS = [
    OpenApiParameter(
        "WWW-Authenticate",
        OpenApiTypes.STR,
        OpenApiParameter.HEADER,
        response=[401],
        description="The scheme to authenticate with: Token.",
    ),
    OpenApiParameter(
        "Retry-After",
        OpenApiTypes.INT,
        OpenApiParameter.HEADER,
        response=[429],
        description="Seconds to wait before trying again.",
    ),
]
RUN_ID = OpenApiParameter(
    "run_id", OpenApiTypes.UUID, OpenApiParameter.PATH, description="The run's id."
)
CLAIM_ID = OpenApiParameter(
    "claim_id",
    # The path takes at most 18 digits (api/urls.py); a longer id answers 404.
    {"type": "integer", "minimum": 1, "maximum": 10**18 - 1},
    OpenApiParameter.PATH,
    description="The claim's id (`id` in GET /api/claims/ and in a run's claims).",
)
IDEMPOTENCY_KEY = OpenApiParameter(
    IDEMPOTENCY_KEY_HEADER,
    {"type": "string", "pattern": f"^{KEY_PATTERN.pattern}$", "maxLength": 200},
    OpenApiParameter.HEADER,
    required=False,
    description="Makes the submission safe to retry: the same key with the same body "
    "answers 200 with the run the first request created (201); the same key with another "
    "body answers 409. 1 to 200 characters among letters, digits and . _ ~ : / + = @ -.",
)
LOCATION = OpenApiParameter(
    "Location",
    OpenApiTypes.URI,
    OpenApiParameter.HEADER,
    response=[201],
    description="The new run's URL.",
)


def _errors(operation: str, *codes: int) -> dict[int, OpenApiResponse]:
    out = {}
    for code in sorted({*codes, *COMMON}):
        description = ERRORS[code]
        if code == 409:
            description = f"{description} {CONFLICTS[operation]}"
        out[code] = OpenApiResponse(s.Error, description=description)
    return out


# A view method: the decorators below describe it and return it as it was.
View = TypeVar("View", bound=Callable[..., Any])


def _operation(
    operation: str,
    *,
    tag: str,
    summary: str,
    description: str,
    ok: dict[int, OpenApiResponse],
    errors: tuple[int, ...],
    parameters: list[OpenApiParameter | type[Serializer[Any]]] | None = None,
    request: object = None,
    examples: list[OpenApiExample] | None = None,
) -> Callable[[View], View]:
    """The decorator that describes one operation, its common errors included."""
    return extend_schema(
        examples=examples or [],
        operation_id=operation,
        tags=[tag],
        summary=summary,
        description=description,
        request=request,
        parameters=[*(parameters or []), *RESPONSE_HEADERS],
        responses={**ok, **_errors(operation, *errors)},
    )


runs_list = _operation(
    "runs_list",
    tag="runs",
    summary="List runs",
    description="Newest first unless `ordering` says otherwise. A bad filter value "
    "answers 400 naming the parameter, and so does an empty one (`?status=`): leave a "
    "filter out to match any value (an empty `workflow` matches any too).",
    parameters=[s.RunQuery],
    ok={200: OpenApiResponse(s.RunSerializer(many=True), description="A page of runs.")},
    errors=(400, 404),
)
runs_create = _operation(
    "runs_create",
    tag="runs",
    summary="Submit a run",
    description="Validates the workflow, version and input, then creates the run and "
    "queues its first steps. Nothing is written when it is refused.",
    request=s.Submission,
    examples=[
        OpenApiExample(
            "merge a change",
            value={"workflow": "merge-change", "input": {"change_id": 42}},
            request_only=True,
        )
    ],
    parameters=[IDEMPOTENCY_KEY, LOCATION],
    ok={
        201: OpenApiResponse(s.RunDetailSerializer, description="A new run."),
        200: OpenApiResponse(
            s.RunDetailSerializer,
            description="The same Idempotency-Key and body as an earlier request: its run.",
        ),
    },
    errors=(*BODY, 409),
)
runs_retrieve = _operation(
    "runs_retrieve",
    tag="runs",
    summary="One run",
    description="The run with its steps (map batches inside their step) and claims.",
    parameters=[RUN_ID],
    ok={200: OpenApiResponse(s.RunDetailSerializer, description="The run.")},
    errors=(404,),
)
runs_export = _operation(
    "runs_export",
    tag="runs",
    summary="Export a run",
    description="The run as one versioned JSON document, read in one snapshot: the run, "
    "its steps, attempts, claims (map items included) with their resolutions (who, when, "
    "why, evidence), signals, compacted map registries, and its events or, for those "
    "retention removed, their summary. `manage.py verify_export FILE` checks a saved one. "
    "Viewers and operators; a submitter, its own runs.",
    parameters=[
        RUN_ID,
        OpenApiParameter(
            "Content-Disposition",
            {"type": "string", "pattern": r'^attachment; filename="run-[0-9a-f-]{36}\.json"$'},
            OpenApiParameter.HEADER,
            response=[200],
            description='A download: attachment; filename="run-<id>.json".',
        ),
    ],
    ok={200: OpenApiResponse(s.RunExportSerializer, description="The export document.")},
    errors=(404,),
)
runs_cancel = _operation(
    "runs_cancel",
    tag="runs",
    summary="Cancel a run",
    description="No new step starts; attempts already running finish and are recorded; "
    "the run ends cancelled (a run_cancelled event records who and why). Operators only.",
    request=s.Cancellation,
    examples=[OpenApiExample("why", value={"reason": "wrong change"}, request_only=True)],
    parameters=[RUN_ID],
    ok={200: OpenApiResponse(s.RunDetailSerializer, description="The cancelled run.")},
    errors=(*BODY, 404, 409),
)
runs_signal = _operation(
    "runs_signal",
    tag="runs",
    summary="Send a signal to a run",
    description="Send the named signal, with an optional JSON payload, to a run whose "
    "workflow waits for it (`@wf.wait(signal=...)`). If the run waits, it is woken; if it "
    "has not reached the wait yet, the signal is kept for it. Recorded as a "
    "signal_received event with the caller as its actor. Submitters and operators.",
    request=s.SignalBody,
    examples=[OpenApiExample("approve", value={"payload": {"approved": True}}, request_only=True)],
    parameters=[
        RUN_ID,
        OpenApiParameter(
            "name",
            OpenApiTypes.STR,
            OpenApiParameter.PATH,
            description="The signal's name; 404 if the run's workflow waits for no such signal.",
        ),
    ],
    ok={201: OpenApiResponse(s.SignalSerializer, description="The signal, as received.")},
    errors=(*BODY, 404, 409),
)
runs_retry_step = _operation(
    "runs_retry_step",
    tag="runs",
    summary="Retry a failed step",
    description="Give a failed step of a failed run a new attempt and reopen the run "
    "(a run_reopened event records who). Idempotency keys follow the usual rules: an "
    "abandoned idempotent claim is retried with the same key, a claim whose effect did "
    "not happen gets a new one, a map step (by name) retries its failed batches and "
    "skips completed items. Operators only.",
    request=None,
    parameters=[
        RUN_ID,
        OpenApiParameter(
            "step",
            OpenApiTypes.STR,
            OpenApiParameter.PATH,
            description="The step's key (a batch: `migrate[3]`), or a map step's name.",
        ),
    ],
    ok={200: OpenApiResponse(s.RunDetailSerializer, description="The reopened run.")},
    errors=(404, 409),
)
steps_list = _operation(
    "runs_steps_list",
    tag="runs",
    summary="A run's steps",
    description="Every step, map batches included, in plan order, each with its attempts.",
    parameters=[RUN_ID],
    ok={200: OpenApiResponse(s.StepSerializer(many=True), description="A page of steps.")},
    errors=(400, 404),
)
events_list = _operation(
    "runs_events_list",
    tag="runs",
    summary="A run's events",
    description="The append-only event log by seq. To tail a run, repeat with "
    "`after_seq` set to the previous answer's `next_after_seq`.",
    parameters=[RUN_ID],
    ok={200: OpenApiResponse(s.EventSerializer(many=True), description="Events, by seq.")},
    errors=(400, 404),
)
claims_list = _operation(
    "claims_list",
    tag="claims",
    summary="List claims",
    description="`status=unresolved` is the reconciliation queue, the longest waiting "
    "first; other statuses come newest first.",
    parameters=[s.ClaimQuery],
    ok={200: OpenApiResponse(s.ClaimSerializer(many=True), description="A page of claims.")},
    errors=(400, 404),
)
claims_resolve = _operation(
    "claims_resolve",
    tag="claims",
    summary="Resolve an unresolved claim",
    description="Say what happened to the effect: succeeded (with its result, if any) or "
    "failed (it did not happen: the step is retried under a new claim if attempts "
    "remain), with a note. Repeating the same decision answers it again (replayed). "
    "Operators only.",
    # One body per outcome, told apart by `outcome`: a failed one has no result.
    request=PolymorphicProxySerializer(
        component_name="Decision",
        serializers={
            "succeeded": s.SucceededDecision,
            "failed": s.FailedDecision,
        },
        resource_type_field_name="outcome",
        many=False,
    ),
    examples=[
        OpenApiExample(
            "it happened",
            value={
                "outcome": "succeeded",
                "note": "merge 4f2a is on the host",
                "result": {"merge_id": 77},
                "reference": "https://codehost.example/merges/77",
            },
            request_only=True,
        ),
        OpenApiExample(
            "it did not happen",
            value={"outcome": "failed", "note": "no merge of change 42 on the host"},
            request_only=True,
        ),
    ],
    parameters=[CLAIM_ID],
    ok={200: OpenApiResponse(s.ResolutionSerializer, description="The resolution.")},
    errors=(*BODY, 404, 409),
)
claims_take = _operation(
    "claims_take",
    tag="claims",
    summary="Take a claim",
    description="Tell other operators you are on it, for RECONCILIATION_TAKE_MINUTES; "
    "taking it again renews it. Operators only.",
    request=None,
    parameters=[CLAIM_ID],
    ok={200: OpenApiResponse(s.TakeSerializer, description="Your take.")},
    errors=(404, 409, 413),
)
claims_release = _operation(
    "claims_release",
    tag="claims",
    summary="Release a claim",
    description="Give up your take of the claim. Operators only.",
    request=None,
    parameters=[CLAIM_ID],
    ok={200: OpenApiResponse(s.ReleaseSerializer, description="Whether you held it.")},
    errors=(404, 409, 413),
)
PAUSE_ID = OpenApiParameter(
    "pause_id",
    {"type": "integer", "minimum": 1, "maximum": 10**18 - 1},
    OpenApiParameter.PATH,
    description="The pause's id (`id` in GET /api/pauses/).",
)
pauses_list = _operation(
    "pauses_list",
    tag="pauses",
    summary="List pauses",
    description="The pauses in effect, by workflow and step. Viewers and operators.",
    ok={200: OpenApiResponse(s.PauseSerializer(many=True), description="A page of pauses.")},
    errors=(400, 404),
)
pauses_create = _operation(
    "pauses_create",
    tag="pauses",
    summary="Pause a workflow or one of its steps",
    description="From its commit on, no new attempt of the workflow (every version), or "
    "of the named step, starts: its queued steps stay queued. Attempts already running "
    "finish and are recorded; probes still run. Operators only.",
    request=s.PauseBody,
    examples=[
        OpenApiExample(
            "hold merges while the code host is down",
            value={"workflow": "merge-change", "step": "merge", "reason": "code host down"},
            request_only=True,
        )
    ],
    ok={201: OpenApiResponse(s.PauseSerializer, description="The pause, in effect.")},
    errors=(*BODY, 404, 409),
)
pauses_resume = _operation(
    "pauses_resume",
    tag="pauses",
    summary="Resume a pause",
    description="Ends the pause and sends the steps that waited behind it again, spread "
    "out at RUNS_RESUME_RATE a second; each starts once. Operators only.",
    request=s.ResumeBody,
    parameters=[PAUSE_ID],
    ok={200: OpenApiResponse(s.ResumedSerializer, description="The ended pause.")},
    errors=(*BODY, 404, 409),
)
workflows_list = _operation(
    "workflows_list",
    tag="workflows",
    summary="List workflows",
    description="Each registered workflow with its versions: steps (effect kind, "
    "dependencies, map or not) and the declared input as JSON Schema.",
    ok={200: OpenApiResponse(s.WorkflowSerializer(many=True), description="Workflows.")},
    errors=(400, 404),
)

BATCH_ID = OpenApiParameter(
    "batch_id",
    {"type": "integer", "minimum": 1, "maximum": 10**18 - 1},
    OpenApiParameter.PATH,
    description="The batch's id (`id` in POST and GET /api/batches/).",
)
BATCH_FILTER_400 = (
    " A bad filter value answers 400 naming it (`filter.status`), as GET /api/runs/ "
    "does; so do an unknown operation and a missing or blank reason. A filter that matches "
    "no run, or more than `max_runs`, answers 409 `batch_selection_refused` (`filter`)."
)
batches_create = _operation(
    "batches_create",
    tag="batches",
    summary="Start a bulk operation",
    description="Cancel every matching active run, or retry every failed step of every "
    "matching failed run. The runs matching now are frozen into the batch (runs that "
    "match later are not added), and a worker processes them in the background, each "
    "run in a transaction of its own, exactly once, resuming after a crash. A run the "
    "engine refuses (it finished, it did not fail) is counted `refused` with the engine's "
    "reason. Follow it with GET /api/batches/{batch_id}/. Operators only." + BATCH_FILTER_400,
    request=s.BatchRequest,
    examples=[
        OpenApiExample(
            "retry failed payments",
            value={
                "operation": "retry",
                "filter": {"status": "failed", "workflow": "charge-payment"},
                "reason": "the payment provider is back",
            },
            request_only=True,
        )
    ],
    parameters=[
        OpenApiParameter(
            "Location",
            OpenApiTypes.URI,
            OpenApiParameter.HEADER,
            response=[202],
            description="The new batch's URL.",
        )
    ],
    ok={202: OpenApiResponse(s.BatchSerializer, description="The batch, pending.")},
    errors=(*BODY, 409),
)
batches_preview = _operation(
    "batches_preview",
    tag="batches",
    summary="Preview a bulk operation",
    description="What POST /api/batches/ would do with the same operation and filter, "
    "counted by the runs' statuses now, with the first runs it applies to (a retry's "
    "steps and the key each will use). Writes nothing. Operators only." + BATCH_FILTER_400,
    request=s.BatchPreviewRequest,
    examples=[
        OpenApiExample(
            "cancel a workflow's active runs",
            value={"operation": "cancel", "filter": {"workflow": "migrate-records"}},
            request_only=True,
        )
    ],
    ok={200: OpenApiResponse(s.BatchPreviewSerializer, description="The preview.")},
    errors=BODY,
)
batches_list = _operation(
    "batches_list",
    tag="batches",
    summary="List batches",
    description="Newest first. Operators only.",
    ok={200: OpenApiResponse(s.BatchSerializer(many=True), description="A page of batches.")},
    errors=(400, 404),
)
batches_retrieve = _operation(
    "batches_retrieve",
    tag="batches",
    summary="One batch",
    description="Its status and counts: poll it until the status is no longer pending "
    "or running. Operators only.",
    parameters=[BATCH_ID],
    ok={200: OpenApiResponse(s.BatchSerializer, description="The batch.")},
    errors=(404,),
)
batches_items = _operation(
    "batches_items_list",
    tag="batches",
    summary="A batch's runs",
    description="One item per run selected, in selection order: pending, applied, "
    "refused (with the engine's reason) or failed. Operators only.",
    parameters=[BATCH_ID],
    ok={200: OpenApiResponse(s.BatchItemSerializer(many=True), description="A page of items.")},
    errors=(400, 404),
)


# --- links -----------------------------------------------------------------------------
# Where the ids an answer gives can be used next (OpenAPI links): clients and tools that
# follow them, Schemathesis' stateful phase among them, reach a run's or a claim's
# operations with ids that exist. A link names only what the answer knows (a signal's
# name, for one, is the caller's).
RUN_OPERATIONS = (
    "runs_retrieve",
    "runs_export",
    "runs_steps_list",
    "runs_events_list",
    "runs_cancel",
    "runs_signal",
    "runs_retry_step",
)
CLAIM_OPERATIONS = ("claims_resolve", "claims_take", "claims_release")


def _each(operations: tuple[str, ...], **parameters: str) -> dict[str, dict[str, str]]:
    return {operation: dict(parameters) for operation in operations}


_NEW_RUN = _each(RUN_OPERATIONS, run_id="$response.body#/id")
LINKS: dict[tuple[str, str], dict[str, dict[str, str]]] = {
    ("runs_create", "201"): _NEW_RUN,
    ("runs_create", "200"): _NEW_RUN,
    ("runs_list", "200"): _each(RUN_OPERATIONS, run_id="$response.body#/results/0/id"),
    ("runs_retrieve", "200"): {
        **_each(
            (
                "runs_export",
                "runs_steps_list",
                "runs_events_list",
                "runs_cancel",
                "runs_signal",
            ),
            run_id="$response.body#/id",
        ),
        "runs_retry_step": {"run_id": "$response.body#/id", "step": "$response.body#/steps/0/key"},
        **_each(CLAIM_OPERATIONS, claim_id="$response.body#/claims/0/id"),
    },
    ("claims_list", "200"): {
        **_each(CLAIM_OPERATIONS, claim_id="$response.body#/results/0/id"),
        "runs_retrieve": {"run_id": "$response.body#/results/0/run_id"},
    },
    ("batches_create", "202"): _each(
        ("batches_retrieve", "batches_items_list"), batch_id="$response.body#/id"
    ),
    ("batches_list", "200"): _each(
        ("batches_retrieve", "batches_items_list"), batch_id="$response.body#/results/0/id"
    ),
    ("claims_take", "200"): _each(
        ("claims_resolve", "claims_release"), claim_id="$response.body#/claim_id"
    ),
    ("pauses_create", "201"): {"pauses_resume": {"pause_id": "$response.body#/id"}},
    ("pauses_list", "200"): {"pauses_resume": {"pause_id": "$response.body#/results/0/id"}},
}


def _operations(result: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        op["operationId"]: op
        for item in result.get("paths", {}).values()
        for op in item.values()
        if isinstance(op, dict) and "operationId" in op
    }


def add_links(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]: LINKS into the generated schema
    (drf-spectacular has no way to declare them per operation)."""
    operations = _operations(result)
    for (source, status), targets in LINKS.items():
        if source not in operations:
            continue  # a schema generated for part of the API
        response = operations[source]["responses"][status]
        response["links"] = {
            target: {"operationId": target, "parameters": parameters}
            for target, parameters in targets.items()
            if target in operations
        }
    return result


# --- the body of a submission, by workflow ---------------------------------------------
def describe_submissions(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]: POST /api/runs/'s body as one of
    the workflows this server has registered (a discriminator on `workflow`), each with
    its versions and the input each declares. A well-formed body naming another
    workflow, another version, or an input the workflow refuses is answered 400; this
    way the schema says so too, and a client can read what it may submit. The
    resolve body needs its body too (drf-spectacular leaves a oneOf body optional)."""
    from runs.workflows import registry

    operations = _operations(result)
    if "claims_resolve" in operations:
        operations["claims_resolve"]["requestBody"]["required"] = True
    schemas = result.get("components", {}).get("schemas", {})
    by_name: dict[str, list[Any]] = {}
    for wf in registry.all_workflows():
        by_name.setdefault(wf.name, []).append(wf)
    if "SubmissionRequest" not in schemas or not by_name:
        return result
    by_workflow(
        schemas,
        "SubmissionRequest",
        "Submission",
        {name: _versions(versions) for name, versions in by_name.items()},
    )
    return result


def describe_pauses(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]: POST /api/pauses/'s body as one of
    the registered workflows (a discriminator on `workflow`), each with the step names a
    pause of it may name. A well-formed body naming a workflow or a step the server does
    not know is answered 400; this way the schema says so too."""
    from runs.workflows import registry

    schemas = result.get("components", {}).get("schemas", {})
    body = schemas.get("PauseBodyRequest")
    names = sorted({wf.name for wf in registry.all_workflows()})
    if body is None or not names:
        return result
    properties = body["properties"]
    branches = {
        name: {
            "type": "object",
            "properties": {
                "workflow": {"type": "string", "enum": [name]},
                "step": {**properties["step"], "enum": ["", *step_names(name)]},
                "reason": properties["reason"],
            },
            "required": body["required"],
            "additionalProperties": False,
        }
        for name in names
    }
    by_workflow(schemas, "PauseBodyRequest", "Pause", branches)
    return result


def by_workflow(
    schemas: dict[str, Any], body: str, prefix: str, branches: dict[str, dict[str, Any]]
) -> None:
    """Replace the component `body` by one of `branches` (a workflow's name -> its
    schema), discriminated on `workflow`; each branch a component `<prefix>.<name>`."""
    mapping = {}
    for name, branch in branches.items():
        component = f"{prefix}.{re.sub(r'[^A-Za-z0-9_-]', '_', name)}"
        while component in schemas:  # two names that read the same once sanitized
            component += "_"
        schemas[component] = branch
        mapping[name] = f"#/components/schemas/{component}"
    schemas[body] = {
        "description": schemas[body].get("description", ""),
        "oneOf": [{"$ref": ref} for ref in mapping.values()],
        "discriminator": {"propertyName": "workflow", "mapping": mapping},
    }


def _versions(versions: list[Any]) -> dict[str, Any]:
    """A workflow's body: its one version's, or one of its versions'."""
    branches = [_submission(wf, latest=wf is versions[-1]) for wf in versions]
    return branches[0] if len(branches) == 1 else {"oneOf": branches}


def _submission(wf: Any, *, latest: bool) -> dict[str, Any]:
    """One workflow version's body; the latest's may leave its version out (or null)."""
    declared = openapi_30(wf.input_schema())
    declared.pop("description", None)  # the workflow's, said once on the body
    declared["description"] = "The run's input (GET /api/workflows/ gives it as JSON Schema too)."
    if latest:
        version = {
            "type": "integer",
            "enum": [wf.version, None],
            "nullable": True,
            "description": f"{wf.version}, the latest; omitted or null: the latest.",
        }
    else:
        version = {"type": "integer", "enum": [wf.version]}
    required = ["workflow"] if latest else ["workflow", "version"]
    if declared.get("required"):
        required.append("input")  # omitted is {}, which its required fields are not
    body: dict[str, Any] = {"type": "object"}
    if wf.description:
        body["description"] = wf.description
    body |= {
        "properties": {
            "workflow": {"type": "string", "enum": [wf.name]},
            "version": version,
            "input": declared,
        },
        "required": required,
        "additionalProperties": False,
    }
    return body


def openapi_30(schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """A workflow's input schema (JSON Schema 2020-12) as an OpenAPI 3.0 schema object:
    no $schema; $defs references inlined; a null type or a null alternative as
    `nullable`; const as a one-value enum; a numeric exclusive bound as a bound with its
    boolean. Input declarations are not recursive, so inlining ends."""
    if isinstance(schema, list):
        return [openapi_30(item, defs) for item in schema]
    if not isinstance(schema, dict):
        return schema
    schema = dict(schema)
    schema.pop("$schema", None)
    defs = {**(defs or {}), **schema.pop("$defs", {})}
    ref = schema.pop("$ref", None)
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        schema = {**defs[ref.removeprefix("#/$defs/")], **schema}
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in ("properties", "$defs"):
            out[key] = {name: openapi_30(sub, defs) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "not", "anyOf", "oneOf", "allOf"):
            out[key] = openapi_30(value, defs)
        else:
            out[key] = value
    if isinstance(out.get("type"), list):
        types = [t for t in out["type"] if t != "null"]
        if len(types) < len(out["type"]):
            out["nullable"] = True
        out["type"] = types[0] if len(types) == 1 else out["type"]
    for key in ("anyOf", "oneOf"):
        options = out.get(key)
        if isinstance(options, list) and {"type": "null"} in options:
            rest = [o for o in options if o != {"type": "null"}]
            del out[key]
            out = {**rest[0], **out} if len(rest) == 1 else {**out, key: rest}
            out["nullable"] = True
    if "const" in out:
        out["enum"] = [out.pop("const")]
    if out.get("nullable") and "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    for bound in ("Minimum", "Maximum"):
        value = out.get(f"exclusive{bound}")
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[bound.lower()] = value
            out[f"exclusive{bound}"] = True
    return out


# --- text without U+0000 ---------------------------------------------------------------
# PostgreSQL cannot store U+0000, and the API refuses it (400) in every string it reads:
# its serializers' text fields (DRF's CharField), its JSON values (serializers.JSONValueField),
# and through those the pages' filters (runs/userinput.py clean_text). A string the schema
# allows, the server must accept; so each text field the schema declares says so.
NO_NUL = r"^[^\x00]*$"


def _refuses_nul(pattern: str) -> bool:
    return re.search(pattern, "text\x00") is None


def forbid_nul(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]: every string a request carries (a
    parameter, or a body's property, at any depth) without an enum or a format gets the
    pattern NO_NUL; one with a pattern of its own must refuse U+0000 already (a field
    declares that pattern itself, e.g. serializers.NoteField). Free-form JSON values (a
    run's input beyond what a workflow declares, a signal's payload, evidence) have no
    string schema to say it on: the API's description says it of them."""
    schemas = result.get("components", {}).get("schemas", {})
    seen: set[str] = set()

    def visit(schema: Any) -> None:
        if not isinstance(schema, dict):
            return
        ref = schema.get("$ref")
        if isinstance(ref, str):
            name = ref.rsplit("/", 1)[-1]
            if name not in seen and name in schemas:
                seen.add(name)
                visit(schemas[name])
            return
        if schema.get("type") == "string" and "enum" not in schema and "format" not in schema:
            pattern = schema.get("pattern")
            if pattern is None:
                schema["pattern"] = NO_NUL
            elif not _refuses_nul(pattern):
                raise AssertionError(f"the pattern {pattern!r} allows U+0000, which is refused")
        for key in ("allOf", "oneOf", "anyOf"):
            for branch in schema.get(key, []):
                visit(branch)
        for key in ("items", "additionalProperties", "not"):
            visit(schema.get(key))
        for prop in schema.get("properties", {}).values():
            visit(prop)

    for item in result.get("paths", {}).values():
        for operation in item.values():
            if not isinstance(operation, dict):
                continue
            for parameter in operation.get("parameters", []):
                visit(parameter.get("schema"))
            for content in operation.get("requestBody", {}).get("content", {}).values():
                visit(content.get("schema"))
    return result


# --- a batch's filter ------------------------------------------------------------------
def describe_batch_filter(result: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"]: a batch's filter is the runs list's,
    which refuses a search `value` without its `field` (runs/reads/filters.py search_filter);
    a blank value (whitespace only) is no value. The schema says so: `field` given, or
    no `value`, or a blank one."""
    schema = result.get("components", {}).get("schemas", {}).get("BatchFilterRequest")
    if schema is not None:
        schema["anyOf"] = [
            {"required": ["field"]},
            {"not": {"required": ["value"]}},
            {"properties": {"value": {"type": "string", "pattern": r"^\s*$"}}},
        ]
    return result
