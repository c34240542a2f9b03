"""Retention (docs/operating.md#retention): remove what finished runs no longer need while
keeping every record that prevents a duplicate effect.

A purge applies each enabled RetentionPolicy to the runs it governs (the default
policy: every workflow without a policy of its own) and touches only runs that are
finished (succeeded, failed, cancelled) past a window, counted from `finished_at` on
the database's clock, with no attempt still running and no claim in flight or
unresolved: a run that is running, waiting or needs reconciliation is never a
candidate. It works in four stages, each in short transactions of at most
`RUNS_RETENTION_BATCH` rows that pick their rows with `FOR UPDATE SKIP LOCKED`:

1. registry (payload window): a map step's succeeded item claims become a watermark
   plus exceptions (MapRegistry), in plan order, `batch` items per transaction; the
   claims it covers are deleted in the transaction that moves the watermark.
2. payloads (payload window): the run's input and result, its steps' results, its
   batches' items (each item; its key stays), its claims' results and evidence and its
   signals' payloads become `{"compacted": true, "size": n, "sha256": hex}` (the size
   and digest of the canonical JSON text). A resolved claim keeps its result and
   evidence: the database refuses any update of a recorded resolution, and retention
   respects that; they go with the claim in stage 4. Event payloads are not rewritten
   (the log refuses UPDATE): they go with their events. The run's search keys (copies
   of input values, runs/workflows/search.py) are deleted with the input.
3. events (event window): the run's events are folded into its RunHistorySummary
   (counts per type, seq range, the projection verify_history needs) and deleted in
   the same transaction, under `SET LOCAL durable_runs.retention = 'on'`, the only
   setting under which the log's trigger allows a DELETE. Only this module sets it.
4. dedup (dedup window, never shorter than the others): claims, map registries and
   submission keys are deleted. Until then a claim stays as its tombstone (key,
   outcome, result digest, dates), so a redelivered message or a resubmission is
   still recognised. Nothing deletes attempts or steps, so no cascade ever writes
   to a claim (the claim trigger refuses to change a resolved one).

Every stage records its progress on the rows it changes (MapRegistry.watermark,
Run.payloads_compacted_at, RunHistorySummary and Run.compacted_at,
Run.claims_purged_at) in the same transaction, so a purge killed at any point and
run again continues where the last commit left it and ends in the same state. The
first stage that touches a run also sets Run.retention_started_at: from then on the
run is not retried (operate.py), since what a retried step would read may be gone.
Every stage takes the run row first (docs/architecture.md, "Locks"), skipping one
that is held, so a stage and an operator's retry of the run never interleave.
Each batch reads its policy again, so an operator's change applies from the next
batch, and a policy disabled or deleted stops the purge.
`preview()` counts what a purge would touch, with the same candidate queries.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models.functions import Now

from runs import sql
from runs.engine.core import faults
from runs.errors import UnknownPolicy
from runs.models import (
    Claim,
    MapRegistry,
    RetentionPolicy,
    RetentionPurge,
    Run,
    RunHistorySummary,
    Step,
    SubmissionKey,
)
from runs.ops import metrics
from runs.record.history import Projection, fold
from runs.states import RUN_FINISHED, AttemptStatus, ClaimStatus

STAGES = ("registry", "payloads", "events", "dedup")

# Run on Django's own cursor, which binds parameters on the client: the planner sees
# the policy's values and simplifies the scope's conditions on them away (retention.sql).
SQL = sql.load(__file__)


@dataclass
class PolicyResult:
    policy: str
    dry_run: bool
    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    batches: int = 0
    seconds: float = 0.0
    purge_id: int | None = None
    stopped: str = ""  # why the purge stopped before its end (its policy changed)

    def line(self) -> str:
        parts = [
            f"{stage}: " + ", ".join(f"{k} {v}" for k, v in self.counts.get(stage, {}).items())
            for stage in STAGES
        ]
        verb = "would touch" if self.dry_run else f"in {self.batches} batches, {self.seconds:.2f}s"
        if self.stopped:
            verb += f", stopped: {self.stopped}"
        return f"policy {self.policy} ({verb}): " + "; ".join(parts)


# --- which runs a policy governs ------------------------------------------------------
def _scope(policy: RetentionPolicy, days: int) -> dict[str, Any]:
    """The parameters of the `scope` condition (retention.sql): the runs the policy
    governs and are eligible, for a window of `days`. A policy for one workflow
    governs that workflow (`workflow`); the default policy (`workflow` NULL), every
    workflow without a policy of its own (`overrides`)."""
    if policy.workflow:
        overrides: list[str] = []
    else:
        overrides = list(
            RetentionPolicy.objects.exclude(workflow="").values_list("workflow", flat=True)
        )
    return {
        "finished": list(RUN_FINISHED),
        "days": days,
        "attempt_running": AttemptStatus.RUNNING,
        "open": [ClaimStatus.UNRESOLVED, ClaimStatus.IN_FLIGHT],
        "workflow": policy.workflow or None,
        "overrides": overrides,
    }


def _mark_started(run_ids: list[Any]) -> None:
    """Mark the runs touched by retention, in the stage's transaction: from then on a
    run is not retried (operate.py), since what a retried step reads may be gone."""
    Run.objects.filter(pk__in=run_ids, retention_started_at__isnull=True).update(
        retention_started_at=Now()
    )


def _runs_per_batch(batch: int) -> int:
    """Runs locked per transaction by the run-wide stages: a run brings a few rows
    (its steps, its step claims) to the payload stage, and the event and dedup stages
    stop at `batch` rows whatever the number of runs."""
    return max(1, batch // 20)


# --- stage 1: map registries ----------------------------------------------------------
def _registry_batch(policy: RetentionPolicy, batch: int) -> dict[str, int]:
    with connection.cursor() as cursor:
        # The run row first, skipped if held (a retry that holds it is reopening the
        # run), then the step (retention.sql, registry_take).
        cursor.execute(SQL["registry_take"], _scope(policy, policy.payload_days))
        row = cursor.fetchone()
        if row is None:
            return {}
        step_id, run_id = row
        cursor.execute(SQL["registry_lock_step"], {"step": step_id})
    _mark_started([run_id])
    registry = MapRegistry.objects.filter(step_id=step_id).first()
    if registry is None:
        sizes = list(
            Step.objects.filter(parent_id=step_id)
            .order_by("batch_index")
            .values_list("batch_index", "items")
        )
        total = sum(len(items or []) for _, items in sizes)
        size = len(sizes[0][1] or []) if sizes else 1
        registry = MapRegistry.objects.create(
            step_id=step_id, run_id=run_id, items=total, batch_size=max(1, size)
        )
    start = registry.watermark
    end = min(registry.items, start + batch)
    size = registry.batch_size
    batches = Step.objects.filter(
        parent_id=step_id, batch_index__gte=start // size, batch_index__lte=max(end - 1, 0) // size
    ).values_list("id", "batch_index", "items")
    wanted: dict[tuple[int, str], int] = {}  # (batch id, item key) -> position
    for batch_id, index, items in batches:
        for offset, pair in enumerate(items or []):
            position = (index or 0) * size + offset
            if start <= position < end:
                wanted[(batch_id, pair["key"])] = position
    succeeded = Claim.objects.filter(
        step_id__in={b for b, _ in wanted},
        item_key__in={k for _, k in wanted},
        status=ClaimStatus.SUCCEEDED,
    ).values_list("id", "step_id", "item_key")
    claim_ids = [cid for cid, b, k in succeeded if (b, k) in wanted]
    done = {(b, k) for _, b, k in succeeded}
    exceptions = [
        k for (b, k), pos in sorted(wanted.items(), key=lambda kv: kv[1]) if (b, k) not in done
    ]
    deleted = Claim.objects.filter(pk__in=claim_ids).delete()[1].get("runs.Claim", 0)
    n = MapRegistry.objects.filter(step_id=step_id, watermark=start).update(
        watermark=end, exceptions=list(registry.exceptions) + exceptions, updated_at=Now()
    )
    if n != 1:
        raise RuntimeError(f"registry of step {step_id} moved under a locked step")
    return {
        "steps": 1 if end == registry.items else 0,
        "items": end - start,
        "claims_deleted": deleted,
    }


def _registry_preview(policy: RetentionPolicy) -> dict[str, int]:
    params = {**_scope(policy, policy.payload_days), "succeeded": ClaimStatus.SUCCEEDED}
    with connection.cursor() as cursor:
        cursor.execute(SQL["registry_preview"], params)
        steps, claims = cursor.fetchone()
    return {"steps": int(steps), "claims_deleted": int(claims)}


# --- stage 2: payloads ----------------------------------------------------------------
def _payload_batch(policy: RetentionPolicy, batch: int) -> dict[str, int]:
    # Runs whose maps' registries are done (stage 1), oldest first, locked.
    take = {**_scope(policy, policy.payload_days), "limit": _runs_per_batch(batch)}
    with connection.cursor() as cursor:
        cursor.execute(SQL["payload_take"], take)
        ids = [row[0] for row in cursor.fetchall()]
        if not ids:
            return {}
        runs = {"runs": ids}
        cursor.execute(SQL["payload_runs"], runs)
        rows = cursor.rowcount
        if rows != len(ids):
            raise RuntimeError("a locked run was compacted by someone else")
        # The run's rows in the lock order (docs/architecture.md): steps, claims,
        # signals; a resolved claim keeps its result and evidence (payload_claims).
        cursor.execute(SQL["payload_steps"], runs)
        rows += cursor.rowcount
        cursor.execute(SQL["payload_claims"], runs)
        rows += cursor.rowcount
        cursor.execute(SQL["payload_signals"], runs)
        rows += cursor.rowcount
        cursor.execute(SQL["payload_search_keys"], runs)
        search_keys = cursor.rowcount
    return {"runs": len(ids), "rows_compacted": rows, "search_keys_deleted": search_keys}


def _payload_preview(policy: RetentionPolicy) -> dict[str, int]:
    # Counted as if stage 1 had run: the item claims it deletes are not counted here.
    params = {**_scope(policy, policy.payload_days), "succeeded": ClaimStatus.SUCCEEDED}
    with connection.cursor() as cursor:
        cursor.execute(SQL["payload_preview"], params)
        runs, compact, search_keys = cursor.fetchone()
    return {
        "runs": int(runs),
        "rows_compacted": int(compact),
        "search_keys_deleted": int(search_keys),
    }


# --- stage 3: events ------------------------------------------------------------------
def _event_batch(policy: RetentionPolicy, batch: int) -> dict[str, int]:
    take = {**_scope(policy, policy.event_days), "limit": _runs_per_batch(batch)}
    with connection.cursor() as cursor:
        cursor.execute(SQL["event_take"], take)
        ids = [row[0] for row in cursor.fetchall()]
        if not ids:
            return {}
        # The only place that sets it; switched off right after the deletes, so that a
        # batch run as a savepoint of a caller's transaction leaves no right to delete
        # behind it (retention.sql, retention_on).
        cursor.execute(SQL["retention_on"])
        deleted, runs_done, touched = _delete_events(cursor, ids, batch)
        _mark_started(touched)
        cursor.execute(SQL["retention_off"])
    return {"runs": runs_done, "events_deleted": deleted}


def _delete_events(cursor: Any, ids: list[Any], batch: int) -> tuple[int, int, list[Any]]:
    """Fold the runs' oldest events (at most `batch` in all) into their summaries and
    delete them; a run left without events is marked compacted. Returns (events
    deleted, runs compacted, runs whose events were deleted). Runs whose remaining
    events all fit in the budget are handled together, a few statements for all of
    them; a run too big for what is left of the budget is cut at it, its next events
    left to the next batch."""
    cursor.execute(SQL["events_remaining"], {"runs": ids})
    remaining = dict(cursor.fetchall())
    budget = batch
    whole: list[Any] = []
    cut: tuple[Any, int] | None = None
    for run_id in ids:
        n = int(remaining[run_id])
        if n <= budget:
            whole.append(run_id)
            budget -= n
        else:
            if not whole:  # nothing fits whole: take the first run's oldest events
                cut = (run_id, budget)
            break
    deleted = 0
    if whole:
        cursor.execute(SQL["events_of_runs"], {"runs": whole})
        events = cursor.fetchall()
        by_run: dict[Any, list[tuple[Any, ...]]] = {}
        for run_id, *event in events:
            by_run.setdefault(run_id, []).append(tuple(event))
        summaries = {s.run_id: s for s in RunHistorySummary.objects.filter(run_id__in=whole)}
        for run_id, run_events in by_run.items():
            _fold_into_summary(run_id, run_events, summaries.get(run_id))
        cursor.execute(SQL["delete_events_of_runs"], {"runs": whole})
        n = cursor.rowcount
        if n != len(events):
            raise RuntimeError(f"{n} events deleted, {len(events)} summarized")
        deleted += n
        Run.objects.filter(pk__in=whole, compacted_at__isnull=True).update(compacted_at=Now())
    if cut is not None:
        run_id, limit = cut
        cursor.execute(SQL["oldest_events"], {"run": run_id, "limit": limit})
        events = cursor.fetchall()
        _fold_into_summary(run_id, events, RunHistorySummary.objects.filter(run_id=run_id).first())
        last = events[-1][0]
        cursor.execute(SQL["delete_oldest_events"], {"run": run_id, "last": last})
        n = cursor.rowcount
        if n != len(events):
            raise RuntimeError(f"run {run_id}: {n} events deleted, {len(events)} summarized")
        deleted += n
    return deleted, len(whole), whole + ([cut[0]] if cut is not None else [])


def _fold_into_summary(
    run_id: Any, events: list[tuple[Any, ...]], summary: RunHistorySummary | None
) -> None:
    """Fold (seq, type, payload) events, oldest first, into the run's summary."""
    if summary is None:
        summary = RunHistorySummary(run_id=run_id, first_seq=events[0][0], counts={})
        projection = Projection()
    else:
        projection = Projection.from_json(summary.projection)
        if events[0][0] != summary.last_seq + 1:
            raise RuntimeError(f"run {run_id}: events after seq {summary.last_seq} are missing")
    counts: dict[str, int] = dict(summary.counts)
    for _, type_, payload in events:
        # Django reads jsonb as text (JSONField decodes it); raw SQL gets the text.
        fold(projection, type_, json.loads(payload) if isinstance(payload, str) else payload)
        counts[type_] = counts.get(type_, 0) + 1
    summary.counts = counts
    summary.events_removed = (summary.events_removed or 0) + len(events)
    summary.last_seq = events[-1][0]
    summary.projection = projection.to_json()
    summary.save()


def _event_preview(policy: RetentionPolicy) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(SQL["event_preview"], _scope(policy, policy.event_days))
        runs, events = cursor.fetchone()
    return {"runs": int(runs), "events_deleted": int(events)}


# --- stage 4: the dedup window ends ---------------------------------------------------
def _dedup_batch(policy: RetentionPolicy, batch: int) -> dict[str, int]:
    take = {**_scope(policy, policy.dedup_days), "limit": _runs_per_batch(batch)}
    with connection.cursor() as cursor:
        cursor.execute(SQL["dedup_take"], take)
        ids = [row[0] for row in cursor.fetchall()]
    if not ids:
        return {}
    budget = batch
    claims = keys = registries = runs_done = 0
    for run_id in ids:
        if budget <= 0:
            break
        # Explicit deletes, claims first: nothing here cascades into a claim (attempts
        # and steps stay), and an operator's take of a claim goes with it.
        chunk = list(
            Claim.objects.filter(run_id=run_id)
            .order_by("id")
            .values_list("id", flat=True)[: budget + 1]
        )
        more = len(chunk) > budget
        chunk = chunk[:budget]
        if chunk:
            claims += Claim.objects.filter(pk__in=chunk).delete()[1].get("runs.Claim", 0)
            budget -= len(chunk)
        if more:
            continue
        registries += MapRegistry.objects.filter(run_id=run_id).delete()[0]
        keys += SubmissionKey.objects.filter(run_id=run_id).delete()[0]
        Run.objects.filter(pk=run_id, claims_purged_at__isnull=True).update(claims_purged_at=Now())
        runs_done += 1
    return {
        "runs": runs_done,
        "claims_deleted": claims,
        "registries_deleted": registries,
        "submission_keys_deleted": keys,
    }


def _dedup_preview(policy: RetentionPolicy) -> dict[str, int]:
    with connection.cursor() as cursor:
        cursor.execute(SQL["dedup_preview"], _scope(policy, policy.dedup_days))
        runs, claims, keys = cursor.fetchone()
    return {"runs": int(runs), "claims_deleted": int(claims), "submission_keys_deleted": int(keys)}


Batch = Callable[[RetentionPolicy, int], dict[str, int]]
Preview = Callable[[RetentionPolicy], dict[str, int]]
_STAGES: dict[str, tuple[Batch, Preview]] = {
    "registry": (_registry_batch, _registry_preview),
    "payloads": (_payload_batch, _payload_preview),
    "events": (_event_batch, _event_preview),
    "dedup": (_dedup_batch, _dedup_preview),
}


# --- entry points ---------------------------------------------------------------------
def policies(name: str | None = None) -> list[RetentionPolicy]:
    """The enabled policies, or the one named (UnknownPolicy if none or disabled)."""
    if name is None:
        return list(RetentionPolicy.objects.filter(enabled=True).order_by("workflow", "name"))
    policy = RetentionPolicy.objects.filter(name=name).first()
    if policy is None:
        known = ", ".join(RetentionPolicy.objects.order_by("name").values_list("name", flat=True))
        raise UnknownPolicy(f"no retention policy named {name!r} (known: {known or 'none'})")
    if not policy.enabled:
        raise UnknownPolicy(f"retention policy {name!r} is disabled; enable it to apply it")
    return [policy]


def preview(*, policy: RetentionPolicy) -> PolicyResult:
    """What a purge of this policy would touch now, per stage; changes no run, only
    records the preview (a dry-run RetentionPurge). A run that several stages would
    touch is counted by each. `apply_retention --dry-run` and the admin's preview."""
    started = time.monotonic()
    result = PolicyResult(policy=policy.name, dry_run=True)
    for stage, (_, count) in _STAGES.items():
        result.counts[stage] = count(policy)
    result.seconds = time.monotonic() - started
    result.purge_id = RetentionPurge.objects.create(
        policy=policy,
        policy_name=policy.name,
        dry_run=True,
        counts=result.counts,
        finished_at=Now(),
    ).id
    return result


def _lock_record(purge_id: int) -> None:
    """Lock the purge's own record first in each batch: a deletion of its policy
    updates the record (SET NULL) before it deletes the policy, so a batch that starts
    meanwhile waits for the deletion to commit, and then finds no policy."""
    list(
        RetentionPurge.objects.select_for_update(no_key=True)
        .filter(pk=purge_id)
        .values_list("id", flat=True)
    )


def _policy_now(policy_id: int) -> RetentionPolicy | str:
    """The policy as committed now (an operator's change applies from the batch that
    starts after it), or why the purge stops: it was disabled or deleted."""
    policy = RetentionPolicy.objects.filter(pk=policy_id).first()
    if policy is None:
        return "the policy was deleted"
    if not policy.enabled:
        return "the policy was disabled"
    return policy


def purge(
    *, policy: RetentionPolicy, batch: int | None = None, timings: dict[str, float] | None = None
) -> PolicyResult:
    """Apply one policy, stage after stage, each to the end, in bounded transactions.
    Each batch reads the policy again: its windows as they are now; disabled or deleted,
    the purge stops. The RetentionPurge row is updated in every batch's transaction, so
    a purge that is killed still shows what it committed. `timings` receives each
    stage's seconds."""
    size = int(batch or settings.RUNS_RETENTION_BATCH)
    started = time.monotonic()
    record = RetentionPurge.objects.create(policy=policy, policy_name=policy.name)
    result = PolicyResult(policy=policy.name, dry_run=False, purge_id=record.id)
    for stage, (run_batch, _) in _STAGES.items():
        if result.stopped:
            break
        totals = result.counts.setdefault(stage, {})
        stage_started = time.monotonic()
        while True:
            with transaction.atomic():
                _lock_record(record.id)
                current = _policy_now(policy.pk)
                if isinstance(current, str):
                    result.stopped = current
                    break
                done = run_batch(current, size)
                if not done:
                    break
                for key, value in done.items():
                    totals[key] = totals.get(key, 0) + value
                _count_rows(stage, done)
                result.batches += 1
                RetentionPurge.objects.filter(pk=record.id).update(
                    counts=result.counts, batches=result.batches
                )
                # Crash tests kill the purge here: the batch's work done, not committed.
                faults.hit("after_effect", f"retention-{stage}")
        if timings is not None:
            timings[stage] = time.monotonic() - stage_started
    RetentionPurge.objects.filter(pk=record.id).update(
        counts=result.counts, batches=result.batches, finished_at=Now()
    )
    result.seconds = time.monotonic() - started
    return result


def _count_rows(stage: str, done: dict[str, int]) -> None:
    """durable_runs_retention_rows_total{stage, action}: rows compacted or deleted,
    counted when the batch commits (runs/ops/metrics.py)."""
    for key, value in done.items():
        if key != "runs" and value:
            metrics.on_commit(lambda k=key, v=value: metrics.PURGED.labels(stage, k).inc(v))


def apply(*, policy: str | None = None, dry_run: bool = False) -> list[PolicyResult]:
    """Every enabled policy (or the one named): purged, or with dry_run previewed."""
    results = []
    for p in policies(policy):
        results.append(preview(policy=p) if dry_run else purge(policy=p))
    return results


__all__ = ["STAGES", "PolicyResult", "apply", "policies", "preview", "purge"]
