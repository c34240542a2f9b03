"""Read-side helpers shared by the command line, the pages and the API."""

from __future__ import annotations

import uuid
from typing import Any

from django.db.models import Q, QuerySet

from runs.models import Claim, Run, RunSearchKey, Step
from runs.states import ClaimStatus


def parse_run_id(value: str) -> uuid.UUID:
    try:
        return uuid.UUID(value)
    except ValueError as exc:
        raise ValueError(f"{value!r} is not a run id (a UUID)") from exc


def with_search_key(runs: QuerySet[Run], name: str, value: str) -> QuerySet[Run]:
    """The runs whose search field `name` is `value`, newest first: ordered by the
    search key's copy of the run's created_at, so that runsearchkey_value_idx gives
    the order and a page reads one page of entries (docs/performance.md)."""
    return runs.filter(search_keys__field=name, search_keys__value=value).order_by(
        "-search_keys__created_at", "-search_keys__run_id"
    )


def search_keys_matching(
    name: str,
    value: str,
    *,
    workflow: str = "",
    created_after: Any = None,
    created_before: Any = None,
) -> QuerySet[RunSearchKey]:
    """The search keys of the runs with_search_key finds, with these filters too (each a
    copy the key holds of its run): one per run, so counting them counts the runs, as an
    index-only range of runsearchkey_value_idx instead of a join that reads each run by
    its primary key (docs/performance.md#search-fields)."""
    keys = RunSearchKey.objects.filter(field=name, value=value)
    if workflow:
        keys = keys.filter(workflow=workflow)
    if created_after is not None:
        keys = keys.filter(created_at__gte=created_after)
    if created_before is not None:
        keys = keys.filter(created_at__lt=created_before)
    return keys


def run_summary(run: Run) -> dict[str, Any]:
    """The run as one JSON object: the contract of `show_run --json`
    (docs/operating.md#commands)."""
    return _summary(run)[0]


def _summary(run: Run) -> tuple[dict[str, Any], list[Claim]]:
    """run_summary()'s object, and the claims of the run's steps it lists (id order),
    which run_detail() shows again with their ids: read once for both. The run's steps,
    top-level and batches, are one query (each answers 201 to a submission, so
    `POST /api/runs/` pays for every query here: docs/performance.md)."""
    steps: list[Step] = []
    by_parent: dict[int, list[Step]] = {}
    for step in Step.objects.filter(run=run).order_by("id"):
        if step.parent_id is None:
            steps.append(step)
        else:
            by_parent.setdefault(step.parent_id, []).append(step)
    for batches in by_parent.values():
        batches.sort(key=lambda batch: batch.batch_index or 0)
    # A map's item claims are its completed-item registry (5,000 for 5,000 items): each
    # map step counts them by status ("items"), and the list names the ones still open
    # (in flight, or unresolved and waiting for a person), which someone may act on.
    step_claims = list(
        Claim.objects.filter(
            Q(item_key__isnull=True)
            | Q(status__in=(ClaimStatus.IN_FLIGHT, ClaimStatus.UNRESOLVED)),
            run=run,
        )
        .select_related("step")
        .order_by("id")
    )
    item_claims = (
        Claim.objects.filter(run=run, item_key__isnull=False)
        .values("step__name", "status")
        .order_by()
    )
    items: dict[str, dict[str, int]] = {}
    for row in item_claims:
        counts = items.setdefault(row["step__name"], {})
        counts[row["status"]] = counts.get(row["status"], 0) + 1

    def step_dict(step: Step) -> dict[str, Any]:
        data: dict[str, Any] = {
            "name": step.name,
            "key": step.key,
            "kind": step.kind,
            "status": step.status,
            "attempts": step.attempts,
            "error": step.error or None,
        }
        if step.id in by_parent:
            data["batches"] = [step_dict(b) for b in by_parent[step.id]]
            data["items"] = items.get(step.name, {})
        return data

    summary = {
        "id": str(run.id),
        "workflow": run.workflow,
        "version": run.version,
        "status": run.status,
        "input": run.input,
        "result": run.result,
        "error": run.error or None,
        "plan_revision": run.plan_revision,
        "submitted_by": run.submitted_by,
        "submitted_via": run.submitted_via,
        "created_at": run.created_at.isoformat() if run.created_at else None,
        "finished_at": run.finished_at.isoformat() if run.finished_at else None,
        "deadline_at": run.deadline_at.isoformat() if run.deadline_at else None,
        "steps": [step_dict(s) for s in steps],
        "claims": [
            {
                "key": c.key,
                "status": c.status,
                "step": c.step.name,
                "kind": c.kind,
                "item_key": c.item_key,
            }
            for c in step_claims
        ],
    }
    return summary, step_claims


def run_detail(run: Run) -> dict[str, Any]:
    """The run as the REST API shows it: run_summary(), its claims with their ids (to
    resolve them), when it last changed, and what retention compacted of it."""
    data, step_claims = _summary(run)
    data["claims"] = [
        {
            "id": c.id,
            "key": c.key,
            "status": c.status,
            "step": c.step.name,
            "kind": c.kind,
            "item_key": c.item_key,
        }
        for c in step_claims
    ]
    data["updated_at"] = run.updated_at.isoformat() if run.updated_at else None
    marks = (run.payloads_compacted_at, run.compacted_at, run.claims_purged_at)
    data["compacted"] = any(m is not None for m in marks)
    for name, mark in zip(
        ("payloads_compacted_at", "compacted_at", "claims_purged_at"), marks, strict=True
    ):
        data[name] = mark.isoformat() if mark else None
    return data
