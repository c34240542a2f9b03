"""One error shape for every error the API answers, 4xx and 5xx (docs/api.md):

    {"error": {"code": "...", "message": "...", "fields": {"field": ["...", ...]}}}

`code` is stable (clients branch on it), `message` is for people, `fields` is present when
the fault lies in named inputs. An unexpected exception anywhere under /api/ (a view,
a middleware) is a 500 `server_error` in the same shape (`server_error`, Django's
handler500), never Django's HTML page. The domain's refusals (engine and reconciliation services)
are mapped here by class (`ANSWERS`), so views only call services and never catch: a refusal writes
nothing (the services promise it) and becomes its status and code below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.urls import Resolver404, resolve
from django.views import defaults
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.views import exception_handler as drf_exception_handler

from reconciliation.services import ClaimSetAside, ClaimTakenByOther
from runs import errors

# Every code the API can answer with (the OpenAPI schema lists them as an enum).
MALFORMED_JSON = "malformed_json"
INVALID = "invalid"
UNKNOWN_WORKFLOW = "unknown_workflow"
UNKNOWN_VERSION = "unknown_version"
INVALID_INPUT = "invalid_input"
INVALID_IDEMPOTENCY_KEY = "invalid_idempotency_key"
NOT_AUTHENTICATED = "not_authenticated"
AUTHENTICATION_FAILED = "authentication_failed"
PERMISSION_DENIED = "permission_denied"
NOT_FOUND = "not_found"
METHOD_NOT_ALLOWED = "method_not_allowed"
NOT_ACCEPTABLE = "not_acceptable"
IDEMPOTENCY_KEY_CONFLICT = "idempotency_key_conflict"
RUN_NOT_ACTIVE = "run_not_active"
CLAIM_ALREADY_RESOLVED = "claim_already_resolved"
CLAIM_NOT_UNRESOLVED = "claim_not_unresolved"
CLAIM_TAKEN = "claim_taken"
DUPLICATE_SIGNAL = "duplicate_signal"
WAIT_FINISHED = "wait_finished"
UNKNOWN_STEP = "unknown_step"
ALREADY_PAUSED = "already_paused"
BATCH_SELECTION_REFUSED = "batch_selection_refused"
NOT_PAUSED = "not_paused"
WORKFLOW_VERSION_UNKNOWN = "workflow_version_unknown"
REFUSED = "refused"
REQUEST_TOO_LARGE = "request_too_large"
UNSUPPORTED_MEDIA_TYPE = "unsupported_media_type"
THROTTLED = "throttled"
SERVER_ERROR = "server_error"

CODES = (
    MALFORMED_JSON,
    INVALID,
    UNKNOWN_WORKFLOW,
    UNKNOWN_VERSION,
    INVALID_INPUT,
    INVALID_IDEMPOTENCY_KEY,
    NOT_AUTHENTICATED,
    AUTHENTICATION_FAILED,
    PERMISSION_DENIED,
    NOT_FOUND,
    METHOD_NOT_ALLOWED,
    NOT_ACCEPTABLE,
    IDEMPOTENCY_KEY_CONFLICT,
    RUN_NOT_ACTIVE,
    CLAIM_ALREADY_RESOLVED,
    CLAIM_NOT_UNRESOLVED,
    CLAIM_TAKEN,
    DUPLICATE_SIGNAL,
    WAIT_FINISHED,
    UNKNOWN_STEP,
    ALREADY_PAUSED,
    NOT_PAUSED,
    WORKFLOW_VERSION_UNKNOWN,
    BATCH_SELECTION_REFUSED,
    REFUSED,
    REQUEST_TOO_LARGE,
    UNSUPPORTED_MEDIA_TYPE,
    THROTTLED,
    SERVER_ERROR,
)

# DRF's own codes, renamed where ours says more.
_DRF_CODES = {"parse_error": MALFORMED_JSON, "invalid": INVALID}

# The header an idempotency key travels in (named in `fields` when it is refused).
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"


class ApiError(exceptions.APIException):
    """A refusal with its status, stable code, message and (optionally) field errors."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        fields: Mapping[str, Sequence[str]] | None = None,
    ) -> None:
        super().__init__(detail=message, code=code)
        self.status_code = status_code
        self.code = code
        self.message = message
        self.fields = {k: [str(m) for m in v] for k, v in (fields or {}).items()} or None


class Answer(NamedTuple):
    """The API's answer to one refusal: its status, the API's own code, and the input
    it names (`fields`), if one."""

    status: int
    code: str
    field: str | None = None


_REFUSED = Answer(409, REFUSED)

# The API's answer to each refusal, by its class: every refusal of the engine's catalogue
# (runs/errors.py) and of the reconciliation services has a row, those without an answer
# of their own a 409 `refused` (tests/engine/test_error_codes.py holds the map to the
# catalogue, the OpenAPI enum and docs/api.md#pagination-and-errors).
ANSWERS: dict[type[errors.EngineError], Answer] = {
    errors.EngineError: _REFUSED,
    # submitting and operating runs
    errors.UnknownWorkflow: Answer(400, UNKNOWN_WORKFLOW, "workflow"),
    errors.UnknownVersion: Answer(400, UNKNOWN_VERSION, "version"),
    errors.InvalidInput: Answer(400, INVALID_INPUT, "input"),
    errors.InvalidSubmissionKey: Answer(400, INVALID_IDEMPOTENCY_KEY, IDEMPOTENCY_KEY_HEADER),
    errors.InvalidDeadline: Answer(400, INVALID, "deadline"),
    errors.SubmissionKeyConflict: Answer(409, IDEMPOTENCY_KEY_CONFLICT),
    errors.SubmitterUnknown: _REFUSED,
    errors.RunNotFound: Answer(404, NOT_FOUND),
    errors.RunNotActive: Answer(409, RUN_NOT_ACTIVE),
    errors.StepNotRetryable: _REFUSED,
    errors.WorkflowVersionUnknown: Answer(409, WORKFLOW_VERSION_UNKNOWN),
    errors.InvalidBatch: Answer(400, INVALID),
    errors.BatchSelectionRefused: Answer(409, BATCH_SELECTION_REFUSED),
    errors.UnknownPolicy: _REFUSED,
    errors.UnknownSignal: Answer(404, NOT_FOUND),
    errors.SignalNotAllowed: Answer(403, PERMISSION_DENIED),
    errors.WaitFinished: Answer(409, WAIT_FINISHED),
    errors.DuplicateSignal: Answer(409, DUPLICATE_SIGNAL),
    # pausing and resuming
    errors.PauseError: _REFUSED,
    errors.PauseReasonRequired: Answer(400, INVALID, "reason"),
    errors.UnknownStep: Answer(400, UNKNOWN_STEP, "step"),
    errors.AlreadyPaused: Answer(409, ALREADY_PAUSED),
    errors.NotPaused: Answer(409, NOT_PAUSED),
    # attempts and claims (the engine's own refusals; no request of the API meets them)
    errors.AttemptFenced: _REFUSED,
    errors.ClaimBusy: _REFUSED,
    errors.ClaimNotTakeable: _REFUSED,
    # resolutions
    errors.ResolutionError: _REFUSED,
    errors.ClaimNotFound: Answer(404, NOT_FOUND),
    errors.ClaimAlreadyResolved: Answer(409, CLAIM_ALREADY_RESOLVED),
    errors.ClaimNotUnresolved: Answer(409, CLAIM_NOT_UNRESOLVED),
    errors.InvalidResolution: Answer(400, INVALID),
    ClaimTakenByOther: Answer(409, CLAIM_TAKEN),
    ClaimSetAside: _REFUSED,
    # probes ("check again")
    errors.ProbeError: _REFUSED,
    errors.NoProbe: _REFUSED,
    errors.ProbeNotDue: _REFUSED,
    errors.ProbeInFlight: _REFUSED,
}


def answer_for(exc: errors.EngineError) -> Answer:
    """The row of the refusal's class, or of the nearest class above it that has one (a
    refusal defined outside the catalogue answers as what it refines)."""
    for cls in type(exc).__mro__:
        if cls in ANSWERS:
            return ANSWERS[cls]
    return _REFUSED  # unreachable: EngineError has a row


def from_domain(exc: Exception) -> ApiError | None:
    """The API's answer to a refusal of the engine or the reconciliation services (any
    EngineError), read from its class; None for anything else. A refusal without an
    answer of its own (e.g. a resolution this process cannot apply) is a 409 `refused`:
    nothing was written, and the message says why."""
    if not isinstance(exc, errors.EngineError):
        return None
    message = str(exc)
    status, code, field = answer_for(exc)
    if isinstance(exc, errors.InvalidInput):
        return ApiError(status, code, message, {"input": exc.problems})
    if isinstance(exc, errors.InvalidResolution):
        field = exc.field
    if isinstance(exc, errors.InvalidBatch):
        # The filter's own parameters are fields of the body's `filter`.
        own = exc.field in ("operation", "reason", "filter")
        field = exc.field if own else f"filter.{exc.field}"
    return ApiError(status, code, message, {field: [message]} if field else None)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Any:
    """REST_FRAMEWORK["EXCEPTION_HANDLER"]: DRF's handler (status, WWW-Authenticate,
    Retry-After, rollback), with every body in the one shape."""
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(*exc.args)
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied(*exc.args)
    elif isinstance(exc, RequestDataTooBig):
        exc = ApiError(413, REQUEST_TOO_LARGE, str(exc) or "the request body is too large")
    elif isinstance(exc, SuspiciousOperation):
        # Django's refusals of a request's form (e.g. too many query parameters),
        # raised when the view first reads it: in the shape too, not Django's HTML.
        exc = ApiError(400, INVALID, str(exc) or "the request was refused as malformed")
    else:
        exc = from_domain(exc) or exc
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    assert isinstance(exc, exceptions.APIException)
    response.data = {"error": error_body(exc)}
    return response


def error_body(exc: exceptions.APIException) -> dict[str, Any]:
    if isinstance(exc, ApiError):
        return _body(exc.code, exc.message, exc.fields)
    if isinstance(exc, exceptions.ValidationError):
        fields = flatten(exc.detail)
        general = fields.pop("non_field_errors", None) or fields.pop("", None)
        if general and not fields:
            return _body(INVALID, " ".join(general), None)
        summary = "; ".join(f"{name}: {' '.join(msgs)}" for name, msgs in fields.items())
        if general:
            summary = f"{' '.join(general)}; {summary}"
        return _body(INVALID, f"invalid request: {summary}", fields)
    code = exc.get_codes()
    code = code if isinstance(code, str) else exc.default_code
    return _body(_DRF_CODES.get(code, code), str(exc.detail), None)


def _body(code: str, message: str, fields: Mapping[str, list[str]] | None) -> dict[str, Any]:
    body: dict[str, Any] = {"code": code, "message": message}
    if fields:
        body["fields"] = dict(fields)
    return body


def flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested validation errors as {"a.b[2]": [messages]}."""
    out: dict[str, list[str]] = {}
    if isinstance(detail, Mapping):
        for key, value in detail.items():
            name = f"{prefix}.{key}" if prefix else str(key)
            for field, msgs in flatten(value, name).items():
                out.setdefault(field, []).extend(msgs)
    elif isinstance(detail, list) and any(isinstance(v, Mapping | list) for v in detail):
        for index, value in enumerate(detail):
            for field, msgs in flatten(value, f"{prefix}[{index}]").items():
                out.setdefault(field, []).extend(msgs)
    elif isinstance(detail, list):
        out[prefix] = [str(m) for m in detail]
    else:
        out[prefix] = [str(detail)]
    return out


def error_response(status_code: int, code: str, message: str) -> JsonResponse:
    """The shape, for answers given outside DRF (middleware, unknown paths)."""
    return JsonResponse({"error": _body(code, message, None)}, status=status_code)


@csrf_exempt
def not_found(request: HttpRequest, *args: Any, **kwargs: Any) -> JsonResponse:
    """Any /api/... path that names no endpoint: JSON, not Django's HTML page."""
    path = request.path
    hint = ""
    if not path.endswith("/"):
        try:
            match = resolve(path + "/")
        except Resolver404:
            match = None
        if match is not None and match.func is not not_found:
            hint = f"; did you mean {path}/ ?"
    return error_response(
        status.HTTP_404_NOT_FOUND,
        NOT_FOUND,
        f"no API endpoint at {path}{hint} (the endpoints are listed at /api/docs/)",
    )


def server_error(request: HttpRequest) -> HttpResponse:
    """Django's handler500 (config/urls.py): under /api/ the error shape, so a client
    reads a 500 as it reads any other error; elsewhere Django's own page. The exception
    is logged by Django (django.request) before this answers; the body says nothing of
    it."""
    if request.path_info.startswith("/api/"):
        return error_response(
            status.HTTP_500_INTERNAL_SERVER_ERROR,
            SERVER_ERROR,
            "the server failed to answer this request; it is logged (nothing here says "
            "whether the request took effect: read the resource again before retrying)",
        )
    return defaults.server_error(request)
