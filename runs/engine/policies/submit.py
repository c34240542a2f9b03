"""submit(): validate, write the run, its plan and its first events in one
transaction, and queue the first steps after commit.

A submission may carry the client's idempotency key. The key belongs to the engine,
whatever the way in (API header, `submit_run --key`, a schedule's tick), scoped to the
principal that submits (principals.py), as payment APIs scope keys per account: the
same key and the same request from the same principal give back the run the first one
created; the same key with another request is refused; another principal's key is
another key.
The database decides, not a Python check: the key is inserted first, in the run's own
transaction (`INSERT … ON CONFLICT DO NOTHING`), so of any number of concurrent
submissions with one key exactly one creates a run, and the others, having waited for
it to commit, find it. A key that the dedup purge deletes between the insert that finds
it and the read is free again: the submission inserts it and creates a run.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db import connection, transaction
from django.db.models import Value
from django.db.models.expressions import Expression
from django.db.models.functions import Least, Now

from runs import sql
from runs.engine.core.clock import db_now_plus
from runs.engine.core.keys import canonical_json
from runs.engine.core.publish import publish_on_commit
from runs.engine.state.ready import make_ready
from runs.engine.state.steps import step_to_queued
from runs.errors import (
    InvalidDeadline,
    InvalidSubmissionKey,
    SubmissionKeyConflict,
    SubmitterUnknown,
    UnknownVersion,
    UnknownWorkflow,
)
from runs.models import Run, Step, SubmissionKey
from runs.ops import tracing
from runs.principals import NOBODY, Principal
from runs.record import events
from runs.states import StepStatus
from runs.workflows import registry
from runs.workflows.definition import Workflow

SQL = sql.load(__file__)

KEY_PATTERN = re.compile(r"[A-Za-z0-9._~:/+=@-]{1,200}")


@dataclass(frozen=True)
class Submission:
    run: Run
    created: bool  # False: the run an earlier submission with the same key created


def resolve_workflow(name: str, version: int | None = None) -> Workflow:
    """The registered workflow `name` at `version` (latest when None). Refuses with
    what is known: UnknownVersion (the workflow has other versions), else
    UnknownWorkflow."""
    if version is None:
        wf = registry.latest(name)
    else:
        wf = registry.get(name, version)
    if wf is None:
        known = registry.versions(name)
        if known and version is not None:
            raise UnknownVersion(name, version, known)
        raise UnknownWorkflow(name, sorted({w.name for w in registry.all_workflows()}))
    return wf


def check_key(key: str) -> str:
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        shown = key if isinstance(key, str) and len(key) <= 60 else f"{str(key)[:60]}…"
        raise InvalidSubmissionKey(
            f"idempotency key {shown!r} is invalid: use 1 to 200 characters among letters, "
            "digits and . _ ~ : / + = @ -"
        )
    return key


def request_digest(
    workflow: str, version: int | None, input: Any, deadline: datetime | None = None
) -> str:
    """What "the same request" means: the same workflow, the same requested version
    (none: the latest), the same input and the same deadline (none: the key is absent,
    so a request without one digests as it always did), as canonical JSON."""
    request: dict[str, Any] = {"workflow": workflow, "version": version, "input": input}
    if deadline is not None:
        request["deadline"] = deadline.astimezone(UTC).isoformat()
    text = canonical_json(request)
    return hashlib.sha256(text.encode()).hexdigest()


def submit_run(
    *,
    workflow: str,
    version: int | None = None,
    input: Any,
    by: Principal = NOBODY,
    deadline: datetime | None = None,
) -> Run:
    """submit() without a key, for callers that want only the run (scripts, bench,
    tests): returns the new Run. Refuses as submit does, nothing written."""
    return submit(workflow=workflow, version=version, input=input, by=by, deadline=deadline).run


def check_deadline(deadline: datetime | None) -> None:
    """Refuse (InvalidDeadline) a submission's deadline that is not timezone-aware, or
    not after the database's now. None passes: no deadline of the submission's own."""
    if deadline is None:
        return
    if not isinstance(deadline, datetime) or deadline.utcoffset() is None:
        raise InvalidDeadline(
            f"deadline {deadline!r} has no timezone: give an ISO 8601 time with its offset, "
            "e.g. 2030-01-01T12:00:00Z"
        )
    with connection.cursor() as cursor:
        cursor.execute(SQL["deadline_passed"], {"deadline": deadline})
        passed = cursor.fetchone()[0]
    if passed:
        raise InvalidDeadline(
            f"deadline {shown_deadline(deadline)} has already passed: a run's deadline must "
            "be in the future"
        )


def shown_deadline(deadline: datetime) -> str:
    """A deadline as events, errors and reasons say it: UTC, to the second."""
    return f"{deadline.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"


def _deadline_at(wf: Workflow, deadline: datetime | None) -> Expression | Value | None:
    """Run.deadline_at as an expression of the INSERT: the earlier of the workflow's
    deadline (from now, on the database's clock) and the submission's own."""
    seconds = wf.deadline_seconds
    if seconds is None:
        return None if deadline is None else Value(deadline)
    declared = db_now_plus(seconds)
    return declared if deadline is None else Least(declared, Value(deadline))


def submit(
    *,
    workflow: str,
    version: int | None = None,
    input: Any,
    key: str | None = None,
    by: Principal = NOBODY,
    deadline: datetime | None = None,
) -> Submission:
    """Submit a run for the principal `by` (recorded on the run); with `key`, at most one
    run per key of that principal (see the module's docstring): two principals' keys
    never meet, and a refusal names only the principal's own run. Refusals write
    nothing: UnknownWorkflow, UnknownVersion, InvalidInput, InvalidSubmissionKey,
    SubmissionKeyConflict, SubmitterUnknown (the command line's `cli`, nobody in
    particular, for a workflow that waits for an approval), InvalidDeadline.

    `deadline`, a timezone-aware time after now: the run's deadline, or the workflow's
    (`workflow(deadline=…)`, counted from now on the database's clock) when that is
    earlier; a submission may shorten the workflow's deadline, never lengthen it
    (docs/authoring.md#deadlines)."""
    if key is not None:
        check_key(key)
    check_deadline(deadline)
    wf = resolve_workflow(workflow, version)
    clean = wf.validate_input(input)
    if by.name == "cli" and wf.approvals():
        raise SubmitterUnknown(wf.name, wf.approvals())
    with transaction.atomic():
        run_id = uuid.uuid4()
        if key is not None:
            digest = request_digest(workflow, version, input, deadline)
            existing = _existing_key(by.name, key, run_id, digest)
            if existing is not None:
                if existing.request_digest != digest:
                    raise SubmissionKeyConflict(key, existing.run_id)
                return Submission(existing.run, created=False)
        run = Run.objects.create(
            id=run_id,
            workflow=wf.name,
            version=wf.version,
            input=clean,
            steps_remaining=len(wf.steps),
            submitted_by=by.name,
            submitted_via=by.via,
            on_behalf_of=list(by.on_behalf_of),
            deadline_at=_deadline_at(wf, deadline),
            # The trace its attempts' spans join: "" while tracing is off.
            traceparent=tracing.submission_traceparent(wf.name),
        )
        if run.deadline_at is not None:
            run.refresh_from_db(fields=["deadline_at"])  # an expression until read back
        _insert_search_keys(run.id, wf.search_keys(clean))
        Step.objects.bulk_create(
            Step(
                run=run,
                key=s.name,
                name=s.name,
                kind=s.kind,
                depends_on=list(s.after),
                pending_deps=len(s.after),
                max_attempts=s.retry.max_attempts,
                plan_revision=run.plan_revision,
                # A first step with a condition is decided below, by make_ready.
                status=StepStatus.PENDING if s.after or s.when else StepStatus.QUEUED,
            )
            for s in wf.steps.values()
        )
        Step.objects.filter(run=run, status=StepStatus.QUEUED).update(queued_at=Now())
        events.append_event(
            run.id,
            events.RunSubmitted(
                workflow=wf.name,
                version=wf.version,
                input=clean,
                plan=[{"key": s.name, "after": list(s.after)} for s in wf.steps.values()],
                deadline=run.deadline_at.isoformat() if run.deadline_at else "",
            ),
        )
        first = list(
            Step.objects.filter(run=run, status=StepStatus.QUEUED).values_list("id", "name")
        )
        for step_id, name in first:
            step_to_queued(run.id, step_id, name, was=None)  # born queued by the INSERT
        ready = [step_id for step_id, _ in first]
        for step in Step.objects.filter(run=run, status=StepStatus.PENDING, pending_deps=0):
            ready.extend(make_ready(run.id, step, wf))
        publish_on_commit(ready)
    run.refresh_from_db()
    return Submission(run, created=True)


def _insert_search_keys(run_id: uuid.UUID, keys: list[tuple[str, str]]) -> None:
    """The run's search keys (docs/authoring.md#search-fields), one INSERT … SELECT for
    all of them; nothing at all for a workflow that declares none."""
    if not keys:
        return
    params: dict[str, Any] = {
        "run": run_id,
        "fields": [f for f, _ in keys],
        "values": [v for _, v in keys],
    }
    with connection.cursor() as cursor:
        cursor.execute(SQL["insert_search_keys"], params)
        if cursor.rowcount != len(keys):
            raise RuntimeError(f"run {run_id}: {cursor.rowcount} search keys of {len(keys)}")


# Each try ends with the key inserted, or read; a read finds nothing only when the
# dedup purge deleted the key in between, which it does once per key.
KEY_CLAIM_TRIES = 3


def _existing_key(scope: str, key: str, run_id: uuid.UUID, digest: str) -> SubmissionKey | None:
    """None once the key is inserted for the run about to be created; else the key as an
    earlier submission left it. The INSERT … DO NOTHING that finds the key locks
    nothing, so retention's dedup purge may delete the key (its run's dedup window is
    over) before it is read: then the key is free, and inserted again."""
    for _ in range(KEY_CLAIM_TRIES):
        if _claim_key(scope, key, run_id, digest):
            return None
        existing = SubmissionKey.objects.select_related("run").filter(scope=scope, key=key).first()
        if existing is not None:
            return existing
    raise RuntimeError(f"submission key {key!r} vanished {KEY_CLAIM_TRIES} times in a row")


def _claim_key(scope: str, key: str, run_id: uuid.UUID, digest: str) -> bool:
    """Insert the key for the run about to be created (the foreign key is checked at
    commit); False if the key exists. A concurrent insert of the same key makes this
    statement wait for that transaction: then it sees the committed key, or inserts
    its own if the other rolled back."""
    params: dict[str, Any] = {"scope": scope, "key": key, "run": run_id, "digest": digest}
    with connection.cursor() as cursor:
        cursor.execute(SQL["claim_key"], params)
        return cursor.fetchone() is not None
