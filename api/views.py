"""The REST API (docs/api.md), thin: each action checks the request's shape, calls one
engine or reconciliation service (or a read query), and serializes what comes back.
Refusals are the services' domain errors, turned into the error shape by api/errors.py;
who may call what is api/permissions.py.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from django.db.models import Exists, F, OuterRef, Prefetch, QuerySet
from django.http import QueryDict
from django.shortcuts import get_object_or_404
from django.urls import reverse
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import Serializer
from rest_framework.viewsets import GenericViewSet

from reconciliation import queries as claim_queries
from reconciliation import services
from runs import engine, roles
from runs.batches import selection, service
from runs.models import (
    Attempt,
    Batch,
    BatchItem,
    BreakerSetting,
    Event,
    LimitSetting,
    Pause,
    RateSetting,
    Run,
    RunSearchKey,
    Step,
)
from runs.principals import Principal, user_principal
from runs.reads.summaries import run_detail, search_keys_matching, with_search_key
from runs.record import export as run_export
from runs.workflows import registry

from . import schema
from . import serializers as s
from .errors import IDEMPOTENCY_KEY_HEADER
from .pagination import SeqCursorPagination
from .permissions import (
    OPERATE,
    READ_BATCHES,
    READ_CLAIMS,
    READ_RUNS,
    SUBMIT,
    RolePermission,
    SignedInRequest,
)


def validated(serializer_class: type[Serializer[Any]], data: Any) -> dict[str, Any]:
    serializer = serializer_class(data=data)
    serializer.is_valid(raise_exception=True)
    return dict(serializer.validated_data)


def principal_of(request: Request) -> Principal:
    """Who submits: the user, by token or by their session."""
    via = "api-token" if request.auth is not None else "api-session"
    return Principal.of_user(request.user, via)


class ApiViewSet(GenericViewSet[Any]):
    """Throttles count every caller before the permission check, so anonymous callers
    and failed token authentications are throttled per address too (DRF would answer
    them 401 before counting).

    Its actions are given a SignedInRequest: RolePermission turned away everyone else.
    (Any model: the viewsets page runs, steps, events, claim rows and workflows.)"""

    permission_classes = [RolePermission]
    roles: dict[str, tuple[Any, str]] = {}
    # No OPTIONS self-description: the OpenAPI schema is the description (405).
    metadata_class = None

    def readable_runs(self) -> QuerySet[Run]:
        """The runs the caller may read: every run for viewers and operators, its own
        for a submitter (docs/api.md, "Roles"). Another's run answers 404, as an unknown
        one does."""
        user = self.request.user
        if roles.reads_own_runs_only(user):
            return Run.objects.filter(submitted_by=user_principal(user.get_username()))
        return Run.objects.all()

    def perform_authentication(self, request: Request) -> None:
        try:
            super().perform_authentication(request)
        except exceptions.AuthenticationFailed:
            self.check_throttles(request)  # now as the anonymous caller it turned out to be
            raise

    def check_permissions(self, request: Request) -> None:
        self.check_throttles(request)
        super().check_permissions(request)

    def check_throttles(self, request: Request) -> None:
        if getattr(request, "_api_throttle_counted", False):
            return
        request._api_throttle_counted = True  # type: ignore[attr-defined]
        super().check_throttles(request)


# --- runs ------------------------------------------------------------------------------
class RunViewSet(ApiViewSet):
    roles = {
        "list": READ_RUNS,
        "retrieve": READ_RUNS,
        "export": READ_RUNS,
        "create": SUBMIT,
        "cancel": OPERATE,
        "retry_step": OPERATE,
        "signal": SUBMIT,
    }
    ORDER_TIEBREAK = "-id"
    # Set by list for a search field filter: what its page counts (api/pagination.py).
    counted: QuerySet[Any] | None = None

    @schema.runs_list
    def list(self, request: SignedInRequest) -> Response:
        query = validated(s.RunQuery, request.query_params)
        runs = self.readable_runs().defer("input", "result")
        if "status" in query:
            runs = runs.filter(status=query["status"])
        if query.get("workflow"):
            runs = runs.filter(workflow=query["workflow"])
        if "created_after" in query:
            runs = runs.filter(created_at__gte=query["created_after"])
        if "created_before" in query:
            runs = runs.filter(created_at__lt=query["created_before"])
        ordering = query.get("ordering", "-created_at")
        # `field` and `value` together: that field; `value` alone: any declared field;
        # `field` alone filters nothing (docs/api.md#finding-a-run-by-a-search-field).
        if "field" in query and "value" not in query:
            del query["field"]
        if "value" in query and "field" not in query:
            runs = runs.filter(
                Exists(RunSearchKey.objects.filter(run_id=OuterRef("pk"), value=query["value"]))
            )
        if (
            "field" in query
            and "status" not in query
            and not roles.reads_own_runs_only(request.user)
        ):
            # The page's count from the search keys alone (an index-only range).
            self.counted = search_keys_matching(
                query["field"],
                query["value"],
                workflow=query.get("workflow", ""),
                created_after=query.get("created_after"),
                created_before=query.get("created_before"),
            )
        if "field" in query and "ordering" not in query:
            # Newest first from the search key's index (runs/web/queries.py).
            runs = with_search_key(runs, query["field"], query["value"])
        else:
            if "field" in query:
                runs = runs.filter(
                    search_keys__field=query["field"], search_keys__value=query["value"]
                )
            field = ordering.lstrip("-")
            key = F(field).desc(nulls_last=True) if ordering.startswith("-") else F(field).asc()
            runs = runs.order_by(key, self.ORDER_TIEBREAK)
        page = self.paginate_queryset(runs)
        return self.get_paginated_response(s.RunSerializer(page, many=True).data)

    @schema.runs_create
    def create(self, request: SignedInRequest) -> Response:
        body = validated(s.Submission, request.data)
        submission = engine.submit(
            workflow=body["workflow"],
            version=body.get("version"),
            input=body["input"],
            key=request.headers.get(IDEMPOTENCY_KEY_HEADER),
            by=principal_of(request),
            deadline=body.get("deadline"),
        )
        run = submission.run
        data = s.RunDetailSerializer(run_detail(run)).data
        if not submission.created:
            return Response(data, status=status.HTTP_200_OK)
        location = request.build_absolute_uri(reverse("api:run", args=[run.id]))
        return Response(data, status=status.HTTP_201_CREATED, headers={"Location": location})

    @schema.runs_retrieve
    def retrieve(self, request: SignedInRequest, run_id: uuid.UUID) -> Response:
        run = get_object_or_404(self.readable_runs(), pk=run_id)
        return Response(s.RunDetailSerializer(run_detail(run)).data)

    @schema.runs_export
    def export(self, request: SignedInRequest, run_id: uuid.UUID) -> Response:
        """The run as one JSON document (docs/api.md, "Run export"), as a download. A
        submitter exports its own runs only (404 otherwise, as for GET …/{id}/); nothing
        of its own run is left out for it, as nothing is in the other answers."""
        doc = run_export.build(
            run_id,
            exported_by=user_principal(request.user.get_username()),
            runs=self.readable_runs(),
        )
        disposition = f'attachment; filename="{run_export.filename(run_id)}"'
        return Response(doc, headers={"Content-Disposition": disposition})

    @schema.runs_cancel
    def cancel(self, request: SignedInRequest, run_id: uuid.UUID) -> Response:
        body = validated(s.Cancellation, request.data)
        run = engine.cancel_run(run_id=run_id, actor=request.user, reason=body.get("reason", ""))
        return Response(s.RunDetailSerializer(run_detail(run)).data)

    @schema.runs_signal
    def signal(self, request: SignedInRequest, run_id: uuid.UUID, name: str) -> Response:
        body = validated(s.SignalBody, request.data)
        get_object_or_404(self.readable_runs().only("id"), pk=run_id)
        signal = engine.send_signal(
            run_id=run_id, name=name, payload=body.get("payload"), actor=request.user
        )
        return Response(s.SignalSerializer(signal).data, status=status.HTTP_201_CREATED)

    @schema.runs_retry_step
    def retry_step(self, request: SignedInRequest, run_id: uuid.UUID, step: str) -> Response:
        run = engine.retry_steps(run_id=run_id, step_keys=[step], actor=request.user)
        return Response(s.RunDetailSerializer(run_detail(run)).data)


class StepViewSet(ApiViewSet):
    """A run's steps (map batches included), each with its attempts."""

    roles = {"list": READ_RUNS}

    @schema.steps_list
    def list(self, request: SignedInRequest, run_id: uuid.UUID) -> Response:
        run = get_object_or_404(self.readable_runs(), pk=run_id)
        steps = (
            Step.objects.filter(run=run)
            .defer("items")
            .annotate(parent_key=F("parent__key"), attempts_started=F("attempts"))
            .prefetch_related(Prefetch("attempt_set", queryset=Attempt.objects.order_by("number")))
            .order_by("id")
        )
        page = self.paginate_queryset(steps)
        return self.get_paginated_response(s.StepSerializer(page, many=True).data)


class EventViewSet(ApiViewSet):
    """A run's event log, by seq: `?after_seq=N` returns only what came after N."""

    roles = {"list": READ_RUNS}
    pagination_class = SeqCursorPagination

    @schema.events_list
    def list(self, request: SignedInRequest, run_id: uuid.UUID) -> Response:
        run = get_object_or_404(self.readable_runs(), pk=run_id)
        events = Event.objects.filter(run=run).annotate(step_key=F("step__key"))
        page = self.paginate_queryset(events)
        return self.get_paginated_response(s.EventSerializer(page, many=True).data)


# --- claims ----------------------------------------------------------------------------
class ClaimViewSet(ApiViewSet):
    roles = {
        "list": READ_CLAIMS,
        "resolve": OPERATE,
        "take": OPERATE,
        "release": OPERATE,
    }

    @schema.claims_list
    def list(self, request: SignedInRequest) -> Response:
        query = validated(s.ClaimQuery, request.query_params)
        rows = claim_queries.claim_list(status=query.get("status"), workflow=query.get("workflow"))
        # Rows is sliced and counted, all that the paginator needs, without being a Sequence.
        page = self.paginate_queryset(rows)  # type: ignore[arg-type]
        return self.get_paginated_response(s.ClaimSerializer(page, many=True).data)

    @schema.claims_resolve
    def resolve(self, request: SignedInRequest, claim_id: int) -> Response:
        body = validated(s.Decision, request.data)
        result = body.get("result")
        resolution = services.resolve(
            claim_id=claim_id,
            user=request.user,
            outcome=body["outcome"],
            note=body["note"],
            result_json=json.dumps(result) if result is not None else None,
            reference=body.get("reference"),
        )
        return Response(s.ResolutionSerializer(resolution).data)

    @schema.claims_take
    def take(self, request: SignedInRequest, claim_id: int) -> Response:
        taken = services.take_claim(claim_id=claim_id, user=request.user)
        return Response(s.TakeSerializer(taken).data)

    @schema.claims_release
    def release(self, request: SignedInRequest, claim_id: int) -> Response:
        released = services.release_claim(claim_id=claim_id, user=request.user)
        return Response(s.ReleaseSerializer({"claim_id": claim_id, "released": released}).data)


# --- pauses ----------------------------------------------------------------------------
class PauseViewSet(ApiViewSet):
    """Pauses (docs/operating.md#pause-and-resume): the engine writes them and their audit."""

    roles = {"list": READ_CLAIMS, "create": OPERATE, "resume": OPERATE}

    @schema.pauses_list
    def list(self, request: SignedInRequest) -> Response:
        page = self.paginate_queryset(Pause.objects.order_by("workflow", "step", "id"))
        return self.get_paginated_response(s.PauseSerializer(page, many=True).data)

    @schema.pauses_create
    def create(self, request: SignedInRequest) -> Response:
        body = validated(s.PauseBody, request.data)
        pause = engine.pause(
            workflow=body["workflow"],
            step=body.get("step", ""),
            actor=request.user,
            reason=body["reason"],
        )
        return Response(s.PauseSerializer(pause).data, status=status.HTTP_201_CREATED)

    @schema.pauses_resume
    def resume(self, request: SignedInRequest, pause_id: int) -> Response:
        body = validated(s.ResumeBody, request.data)
        resumed = engine.resume(pause_id=pause_id, actor=request.user, reason=body["reason"])
        return Response(s.ResumedSerializer(resumed).data)


# --- batches (bulk operations) ------------------------------------------------------
def filter_params(body: dict[str, Any]) -> QueryDict:
    """The API's filter as the runs list's query string, for the list's own parser
    (runs/batches/selection.py): both select the same runs."""
    params = QueryDict(mutable=True)
    for name, value in (body.get("filter") or {}).items():
        text = value.isoformat() if hasattr(value, "isoformat") else str(value)
        if text:
            params[name] = text
    return params


def _preview_data(preview: selection.Preview) -> dict[str, Any]:
    return {
        "operation": preview.operation,
        "filter": preview.filter,
        "matched": preview.matched,
        "capped": preview.capped,
        "max_runs": selection.MAX_RUNS,
        "applies": preview.applies,
        "refused": preview.refused,
        "refusals": [{"why": r.why, "count": r.count} for r in preview.refusals],
        "sample": [
            {
                "run_id": sample.run_id,
                "workflow": sample.workflow,
                "status": sample.status,
                "steps": [
                    {"key": key, "kind": kind, "retry_key": retry_key}
                    for key, kind, retry_key in (sample.plan.steps if sample.plan else ())
                ],
                "effects_kept": len(sample.plan.done) if sample.plan else 0,
                "refused": sample.refused or None,
            }
            for sample in preview.samples
        ],
        "sample_rest": preview.rest,
    }


class BatchViewSet(ApiViewSet):
    """Bulk operations (docs/api.md, "Batches"): operators start them (and preview
    them); viewers and operators read them."""

    roles = {
        "list": READ_BATCHES,
        "create": OPERATE,
        "retrieve": READ_BATCHES,
        "items": READ_BATCHES,
        "preview": OPERATE,
    }

    @schema.batches_list
    def list(self, request: SignedInRequest) -> Response:
        page = self.paginate_queryset(Batch.objects.order_by("-created_at", "-id"))
        data = s.BatchSerializer(page, many=True, context={"request": request}).data
        return self.get_paginated_response(data)

    @schema.batches_create
    def create(self, request: SignedInRequest) -> Response:
        body = validated(s.BatchRequest, request.data)
        batch = service.create_batch(
            operation=body["operation"],
            params=filter_params(body),
            actor=request.user,
            reason=body["reason"],
        )
        data = s.BatchSerializer(batch, context={"request": request}).data
        location = data["links"]["self"]
        return Response(data, status=status.HTTP_202_ACCEPTED, headers={"Location": location})

    @schema.batches_preview
    def preview(self, request: SignedInRequest) -> Response:
        body = validated(s.BatchPreviewRequest, request.data)
        preview = selection.preview(body["operation"], filter_params(body))
        return Response(s.BatchPreviewSerializer(_preview_data(preview)).data)

    @schema.batches_retrieve
    def retrieve(self, request: SignedInRequest, batch_id: int) -> Response:
        batch = get_object_or_404(Batch, pk=batch_id)
        return Response(s.BatchSerializer(batch, context={"request": request}).data)

    @schema.batches_items
    def items(self, request: SignedInRequest, batch_id: int) -> Response:
        batch = get_object_or_404(Batch.objects.only("id"), pk=batch_id)
        page = self.paginate_queryset(BatchItem.objects.filter(batch=batch).order_by("id"))
        return self.get_paginated_response(s.BatchItemSerializer(page, many=True).data)


# --- workflows -------------------------------------------------------------------------
def _with_breakers(
    wf: Any, described: dict[str, Any], overrides: dict[tuple[str, str], BreakerSetting]
) -> dict[str, Any]:
    """Each declared breaker as it applies now (Breaker.now, as the engine reads it),
    with the declaration beside it."""
    for step in described["steps"]:
        stepdef = wf.stepdef(step["name"])
        if stepdef is None or stepdef.breaker is None:
            continue
        applied = stepdef.breaker.now(overrides.get((wf.name, stepdef.name)))
        step["breaker"] = {**applied.describe(), "declared": step["breaker"]}
    return described


def _with_limit_overrides(
    described: dict[str, Any],
    overrides: dict[tuple[str, str, str], int],
    rates: dict[tuple[str, str, str], RateSetting],
) -> dict[str, Any]:
    """Each declared concurrency limit and rate as it applies now: an operator's
    override (runs.LimitSetting, runs.RateSetting), if one stands, else the declared
    numbers (which `declared_max` and `declared` keep)."""

    def now(limit: dict[str, Any], step: str) -> dict[str, Any]:
        key = (described["name"], step, limit["per"] or "")
        return {
            **limit,
            "max": overrides.get(key, limit["max"]),
            "declared_max": limit["max"],
            "overridden": key in overrides,
        }

    def rate_now(rate: dict[str, Any], step: str) -> dict[str, Any]:
        key = (described["name"], step, rate["per"] or "")
        override = rates.get(key)
        return {
            **rate,
            "starts": override.starts if override else rate["starts"],
            "every": override.every_seconds if override else rate["every"],
            "declared": {"starts": rate["starts"], "every": rate["every"]},
            "overridden": override is not None,
        }

    for step in described["steps"]:
        if "limits" in step:
            step["limits"] = [now(limit, step["name"]) for limit in step["limits"]]
        if "rate" in step:
            step["rate"] = rate_now(step["rate"], step["name"])
    if "limit" in described:
        described["limit"] = now(described["limit"], "")
    if "rate" in described:
        described["rate"] = rate_now(described["rate"], "")
    return described


class WorkflowViewSet(ApiViewSet):
    roles = {"list": READ_RUNS}

    @schema.workflows_list
    def list(self, request: SignedInRequest) -> Response:
        by_name: dict[str, list[Any]] = {}
        for wf in registry.all_workflows():
            by_name.setdefault(wf.name, []).append(wf)
        overrides = {(o.workflow, o.step): o for o in BreakerSetting.objects.all()}
        limits = {(o.workflow, o.step, o.per): o.max for o in LimitSetting.objects.all()}
        rates = {(o.workflow, o.step, o.per): o for o in RateSetting.objects.all()}
        workflows = [
            {
                "name": name,
                "latest_version": versions[-1].version,
                "versions": [
                    _with_limit_overrides(
                        _with_breakers(
                            wf, {**wf.describe(), "input_schema": wf.input_schema()}, overrides
                        ),
                        limits,
                        rates,
                    )
                    for wf in versions
                ],
            }
            for name, versions in sorted(by_name.items())
        ]
        page = self.paginate_queryset(workflows)
        return self.get_paginated_response(s.WorkflowSerializer(page, many=True).data)
