"""Seed the UI benchmark's database: 100,000 runs and 1,000,000 events (bench/ui.py).

    make bench-ui                                   # seeds if needed, then measures
    DATABASE_URL=… .venv/bin/python bench/seed_ui.py [--if-needed | --force]

The data goes to a database of its own (`<DATABASE_URL's name>_ui_bench`, see
bench/uidb.py), never to the configured one. A database that already holds runs is
refused unless `--force` (which empties its runs first); `--if-needed` leaves a
complete seed of the same size alone.

How: a dozen *template* runs are made by the engine itself, in-process (publishing
switched off): succeeded runs of the three example workflows, one whose worker died
mid-batch, a merge an operator resolved, failures (a declined payment, a payment API
that timed out, a merge with conflicts), merges waiting for a decision (worker died;
code host answered 502), a cancelled migration. Then each template is cloned in bulk
by `INSERT … SELECT` over a table of clones (new run id, time shift): every row is a
copy of a row the engine wrote, with its ids mapped, its times shifted and its run id
replaced in claim keys and payloads, so it satisfies every CHECK and UNIQUE
constraint; the event log is only inserted into, as its trigger demands. Clones are
inserted in creation order (created_at spread over `--days`, the newest in the last
minutes, so the overview's chart has something to show), as a live system would
have written them. The proportions are in MIX; the number of migrations, the
templates with the most events, is chosen so that the events add up to `--events`.
One more run, a migrate-records run with ~2,000 events, is made by the engine.
Finally VACUUM ANALYZE, as autovacuum would have done by then.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any
from unittest import mock

import uidb  # bench/, the directory of this script

# Template -> share of the runs. "migrate_ok" and "charge_ok" take what is left, in
# the ratio that makes the events add up (see plan()).
MIX = {
    "merge_ok": 0.20,
    "migrate_crashed_ok": 0.03,
    "merge_resolved_ok": 0.01,
    "charge_declined": 0.04,
    "charge_timeout": 0.02,
    "merge_conflict": 0.02,
    "merge_unresolved_died": 0.002,
    "merge_unresolved_502": 0.001,
    "migrate_cancelled": 0.03,
}
BALANCE = ("charge_ok", "migrate_ok")  # few events, many events
# Clone n of a merge merges change CHANGE_BASE + n (runs/workflows/search.py: its search key).
CHANGE_BASE = 1_000_000
# Tables emptied by --force: the runs (and everything that refers to them) and the
# example workflows' fake external systems.
TABLES = (
    "runs_run",
    "runs_runsearchkey",
    "examples_sourcerecord",
    "examples_targetrecord",
    "examples_merge",
    "examples_paymentcharge",
    "examples_paymentrequest",
)


class PaymentDeclined(Exception):
    pass


PaymentDeclined.__module__ = "payments"  # as a payment client library would name it


# --- templates, made by the engine ------------------------------------------------------
@contextmanager
def no_publishing() -> Iterator[None]:
    """The engine's messages go nowhere: this script drives the steps itself."""
    from runs.engine import tools

    with mock.patch.object(tools.publish, "send"):
        yield


WORKERS = [f"celery@web-{n}" for n in range(1, 5)]


def drive(run_id: Any) -> None:
    """Execute the run's ready steps until none is left, as workers would (a retry is
    due at once instead of after its backoff)."""
    from django.db.models.functions import Now

    from runs import engine
    from runs.models import Step
    from runs.states import RUN_ACTIVE, StepStatus

    for n in range(10_000):
        step = (
            Step.objects.filter(
                run_id=run_id,
                status__in=[StepStatus.QUEUED, StepStatus.RETRYING],
                run__status__in=RUN_ACTIVE,
            )
            .order_by("id")
            .first()
        )
        if step is None:
            return
        if step.status == StepStatus.RETRYING:
            Step.objects.filter(pk=step.pk).update(next_attempt_at=Now())
        engine.execute_step(step_id=step.id, worker=WORKERS[n % len(WORKERS)])
    raise RuntimeError(f"run {run_id} did not settle")


def crash(step_id: int) -> None:
    """A worker takes the step, passes its last lease check before the effect (as the
    executor does just before calling a guarded step's function) and dies: its lease
    runs out and the sweeper finds it. Without that check a guarded attempt is known
    not to have called its effect, and the sweeper retries it instead of leaving its
    claim for a decision."""
    from django.db import connection

    from runs import engine
    from runs.engine import tools

    started = tools.start_attempt(step_id=step_id, worker="celery@web-9")
    assert started is not None
    tools.renew_lease(started.attempt.id, started.lease_seconds, entering_effect=True)
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_attempt SET lease_expires_at = now() - interval '1 second' "
            "WHERE status = 'running'"
        )
    assert engine.sweep().crashed


def first_queued(run_id: Any) -> int:
    from runs.models import Step

    step = Step.objects.filter(run_id=run_id, status="queued").order_by("id").first()
    assert step is not None, f"nothing queued in run {run_id}"
    return step.id


def submit(workflow: str, data: dict[str, Any], key: str | None = None) -> Any:
    from runs import engine

    return engine.submit(workflow=workflow, input=data, key=key).run.id


def charge(amount: int, fails: Exception | None = None, key: str | None = None) -> Any:
    from examples.fakes import PaymentAPI

    run_id = submit("charge-payment", {"amount": amount}, key=key)
    if fails is None:
        drive(run_id)
    else:
        with mock.patch.object(PaymentAPI, "charge", side_effect=fails):
            drive(run_id)
    return run_id


def merge(change_id: int, fails: Exception | None = None) -> Any:
    from examples.fakes import CodeHost

    run_id = submit("merge-change", {"change_id": change_id})
    if fails is None:
        drive(run_id)
    else:
        with mock.patch.object(CodeHost, "merge", side_effect=fails):
            drive(run_id)
    return run_id


MIGRATE = {"count": 20, "batch_size": 5}


def migrate_crashed() -> Any:
    """The worker of the second batch died; the batch ran again."""
    run_id = submit("migrate-records", MIGRATE)
    drive_steps(run_id, 2)  # list_records, migrate[0]
    crash(first_queued(run_id))
    drive(run_id)
    return run_id


def drive_steps(run_id: Any, n: int) -> None:
    from runs import engine

    for _ in range(n):
        engine.execute_step(step_id=first_queued(run_id), worker=WORKERS[0])


def merge_unresolved(fails: Exception | None) -> Any:
    """A merge waiting for a decision: its worker died, or the code host answered with
    an error (the merge may or may not have happened)."""
    from examples.fakes import CodeHost

    run_id = submit("merge-change", {"change_id": 77})
    if fails is None:
        crash(first_queued(run_id))
    else:
        with mock.patch.object(CodeHost, "merge", side_effect=fails):
            drive(run_id)
    return run_id


def merge_resolved(operator: Any) -> Any:
    from reconciliation import services
    from runs.models import Claim

    run_id = merge_unresolved(None)
    claim = Claim.objects.get(run_id=run_id)
    services.resolve(
        claim_id=claim.id,
        user=operator,
        outcome="succeeded",
        note="merged: the code host lists the merge commit",
        result_json='{"merge_id": 9182, "change_id": 77}',
    )
    drive(run_id)
    return run_id


def migrate_cancelled(operator: Any) -> Any:
    from runs import engine

    run_id = submit("migrate-records", MIGRATE)
    drive_steps(run_id, 3)  # list_records, migrate[0], migrate[1]
    engine.cancel_run(run_id=run_id, actor=operator, reason="wrong source table")
    return run_id


def make_templates() -> dict[str, Any]:
    operator = operator_user()
    ok = submit("migrate-records", MIGRATE)
    drive(ok)
    return {
        "charge_ok": charge(1250, key="order-template"),
        "merge_ok": merge(4242),
        "migrate_ok": ok,
        "migrate_crashed_ok": migrate_crashed(),
        "merge_resolved_ok": merge_resolved(operator),
        "charge_declined": charge(990, PaymentDeclined("card declined: insufficient funds")),
        "charge_timeout": charge(4000, TimeoutError("payment API did not answer within 10 s")),
        "merge_conflict": merge(
            512, not_applied("change 512 has merge conflicts with the target branch")
        ),
        "merge_unresolved_died": merge_unresolved(None),
        "merge_unresolved_502": merge_unresolved(
            ConnectionError("code host answered 502 Bad Gateway after the merge request")
        ),
        "migrate_cancelled": migrate_cancelled(operator),
    }


def not_applied(message: str) -> Exception:
    from runs.workflows import NotApplied

    return NotApplied(message)


def operator_user() -> Any:
    from django.contrib.auth.models import User

    from runs.management.commands.createoperator import grant_role

    user, created = User.objects.get_or_create(username="olivia")
    if created:
        user.set_unusable_password()
        user.save()
        grant_role(user, "operators")
    return user


def make_big_run(events: int, template: Any) -> Any:
    """A migrate-records run with about `events` events, in batches of 2: the number
    of batches comes from the migration template (events per batch, and the rest)."""
    from runs.models import Event, Step

    batches = Step.objects.filter(run_id=template, parent__isnull=False).count()
    per_batch = Event.objects.filter(run_id=template, step__parent__isnull=False).count()
    per_batch //= batches
    fixed = Event.objects.filter(run_id=template).count() - per_batch * batches
    n = max(1, round((events - fixed) / per_batch))
    run_id = submit("migrate-records", {"count": 2 * n, "batch_size": 2})
    drive(run_id)
    return run_id


# --- cloning ------------------------------------------------------------------------------
def columns(cursor: Any, table: str) -> list[tuple[str, str]]:
    cursor.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = current_schema() AND table_name = %s ORDER BY ordinal_position",
        [table],
    )
    return cursor.fetchall()


# Text columns that may hold a run id (claim keys start with it; errors quote keys).
RUN_ID_TEXT = {"key", "error", "resolution_note"}


def select_list(cursor: Any, table: str, overrides: dict[str, str | None]) -> tuple[str, str]:
    """(column list, expressions) copying table `t` into clone `c`: ids from
    `overrides` (None: the column's default), times shifted, the template's run id
    replaced by the clone's in JSON and in keys and errors."""
    names, exprs = [], []
    for name, data_type in columns(cursor, table):
        if name in overrides:
            if overrides[name] is None:
                continue
            expr = overrides[name]
        elif data_type == "timestamp with time zone":
            expr = f"t.{name} + c.shift"
        elif data_type == "jsonb":
            # The run id, and a merge's change id (each clone merges a change of its own:
            # the runs list's search field filter finds one run, as it would live).
            expr = (
                f"replace(replace(t.{name}::text, c.template::text, c.run_id::text), "
                "c.change_from, c.change_to)::jsonb"
            )
        elif name in RUN_ID_TEXT:
            expr = f"replace(t.{name}, c.template::text, c.run_id::text)"
        else:
            expr = f"t.{name}"
        names.append(name)
        exprs.append(expr)
    return ", ".join(names), ", ".join(exprs)


def clone(cursor: Any, say: Callable[[str], None]) -> None:
    """Copy every template run once per row of the temporary table `clone`."""

    def insert(table: str, overrides: dict[str, str | None], joins: str, order: str) -> None:
        t0 = time.monotonic()
        names, exprs = select_list(cursor, table, overrides)
        cursor.execute(
            f"INSERT INTO {table} ({names}) SELECT {exprs} FROM {joins} ORDER BY {order}"
        )
        say(f"  {table}: {cursor.rowcount:,} rows in {time.monotonic() - t0:.1f}s")

    cursor.execute("SELECT count(*) FROM runs_step WHERE current_attempt_id IS NOT NULL")
    assert cursor.fetchone()[0] == 0, "a template has a running step"
    for table in ("runs_step", "runs_attempt", "runs_claim"):
        cursor.execute(f"SELECT coalesce(max(id), 0) FROM {table}")
        base = cursor.fetchone()[0]
        cursor.execute(
            f"CREATE TEMP TABLE {table}_map AS "
            f"SELECT c.n, t.id AS old_id, {base} + row_number() OVER (ORDER BY c.n, t.id) "
            f"AS new_id FROM clone c JOIN {table} t ON t.run_id = c.template"
        )
        cursor.execute(f"CREATE UNIQUE INDEX ON {table}_map (n, old_id)")
        cursor.execute(f"ANALYZE {table}_map")

    insert("runs_run", {"id": "c.run_id"}, "clone c JOIN runs_run t ON t.id = c.template", "c.n")
    insert(
        "runs_step",
        {
            "id": "m.new_id",
            "run_id": "c.run_id",
            "parent_id": "p.new_id",
            "current_attempt_id": "NULL",
        },
        "runs_step_map m JOIN clone c USING (n) JOIN runs_step t ON t.id = m.old_id "
        "LEFT JOIN runs_step_map p ON p.n = m.n AND p.old_id = t.parent_id",
        "m.new_id",
    )
    insert(
        "runs_attempt",
        {"id": "m.new_id", "run_id": "c.run_id", "step_id": "s.new_id"},
        "runs_attempt_map m JOIN clone c USING (n) JOIN runs_attempt t ON t.id = m.old_id "
        "JOIN runs_step_map s ON s.n = m.n AND s.old_id = t.step_id",
        "m.new_id",
    )
    clone_claims(cursor, insert)
    insert(
        "runs_event",
        {"id": None, "run_id": "c.run_id", "step_id": "s.new_id"},
        "clone c JOIN runs_event t ON t.run_id = c.template "
        "LEFT JOIN runs_step_map s ON s.n = c.n AND s.old_id = t.step_id",
        "c.n, t.seq",
    )
    # The search keys (runs/workflows/search.py) of the clone's input: a merge's change id
    # is the clone's own (CHANGE_BASE + n), as in its input; a charge's amount is its
    # template's (many charges share an amount).
    insert(
        "runs_runsearchkey",
        {
            "id": None,
            "run_id": "c.run_id",
            "value": "CASE WHEN t.field = 'change_id' THEN c.change_id ELSE t.value END",
        },
        "clone c JOIN runs_runsearchkey t ON t.run_id = c.template",
        "c.n",
    )
    # API clients submit payments with an Idempotency-Key: "order-0000042".
    insert(
        "runs_submissionkey",
        {"id": None, "key": "'order-' || lpad(c.n::text, 7, '0')", "run_id": "c.run_id"},
        "clone c JOIN runs_submissionkey t ON t.run_id = c.template",
        "c.n",
    )
    for table in ("runs_step", "runs_attempt", "runs_claim"):
        cursor.execute(
            f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))"
        )


# A map item's claim that the item fence checks (runs/sql/schema.sql): inserted succeeded,
# by an attempt, which must hold its lease when the claim is written.
FENCED = "t.item_key IS NOT NULL AND t.status = 'succeeded' AND t.attempt_id IS NOT NULL"


def clone_claims(
    cursor: Any, insert: Callable[[str, dict[str, str | None], str, str], None]
) -> None:
    """Copy the templates' claims, in the order the engine wrote them: a map item's claim
    while its batch attempt ran under a live lease. The fence is checked at each insert
    (not at COMMIT, when every cloned attempt has long finished): the cloned attempts
    that wrote item claims run again, with a lease, while their claims are inserted, and
    then get their template's outcome back. A step has one running attempt at a time
    (attempt_one_running_per_step), so a batch whose items were written by two of its
    attempts (one died part-way) is done in two phases, first attempt first. Claim ids
    come from runs_claim_map, so they are in the order a single insert would give."""
    cursor.execute("SET CONSTRAINTS runs_claim_item_fence IMMEDIATE")
    cursor.execute(
        "CREATE TEMP TABLE item_attempt AS SELECT a.id AS old_id, "
        "row_number() OVER (PARTITION BY a.step_id ORDER BY a.number) AS phase "
        "FROM runs_attempt a WHERE a.id IN (SELECT t.attempt_id FROM runs_claim t "
        f"WHERE t.run_id IN (SELECT template FROM clone) AND {FENCED})"
    )
    cursor.execute("SELECT coalesce(max(phase), 0) FROM item_attempt")
    phases = cursor.fetchone()[0]
    joins = (
        "clone c JOIN runs_claim t ON t.run_id = c.template "
        "JOIN runs_claim_map k ON k.n = c.n AND k.old_id = t.id "
        "JOIN runs_step_map s ON s.n = c.n AND s.old_id = t.step_id "
        "LEFT JOIN runs_attempt_map a ON a.n = c.n AND a.old_id = t.attempt_id "
        "LEFT JOIN item_attempt i ON i.old_id = t.attempt_id"
    )
    overrides: dict[str, str | None] = {
        "id": "k.new_id",
        "run_id": "c.run_id",
        "step_id": "s.new_id",
        "attempt_id": "a.new_id",
    }
    insert("runs_claim", overrides, f"{joins} WHERE NOT ({FENCED})", "k.new_id")
    attempts = (
        "FROM runs_attempt_map m JOIN item_attempt i ON i.old_id = m.old_id "
        "JOIN clone c ON c.n = m.n JOIN runs_attempt t ON t.id = m.old_id "
        "WHERE a.id = m.new_id AND i.phase = %s"
    )
    for phase in range(1, phases + 1):
        cursor.execute(
            "UPDATE runs_attempt a SET status = 'running', finished_at = NULL, "
            f"lease_expires_at = statement_timestamp() + interval '1 hour' {attempts}",
            [phase],
        )
        insert("runs_claim", overrides, f"{joins} WHERE {FENCED} AND i.phase = {phase}", "k.new_id")
        cursor.execute(
            "UPDATE runs_attempt a SET status = t.status, finished_at = t.finished_at + c.shift, "
            f"lease_expires_at = t.lease_expires_at + c.shift {attempts}",
            [phase],
        )
    cursor.execute("SET CONSTRAINTS runs_claim_item_fence DEFERRED")


def plan(events_of: dict[str, int], runs: int, events: int, fixed_events: int) -> dict[str, int]:
    """How many clones of each template: MIX's shares, and the rest split between the
    two BALANCE templates so that the events add up to `events` (as near as whole runs
    allow)."""
    counts = {name: round(share * runs) for name, share in MIX.items()}
    rest_runs = runs - sum(counts.values())
    rest_events = events - fixed_events - sum(events_of[k] * n for k, n in counts.items())
    low, high = (events_of[name] for name in BALANCE)
    many = round((rest_events - rest_runs * low) / (high - low))
    many = min(max(many, 0), rest_runs)
    counts[BALANCE[0]] = rest_runs - many
    counts[BALANCE[1]] = many
    return counts


def seed(args: argparse.Namespace) -> dict[str, Any]:
    from django.db import connection, transaction
    from django.utils import timezone

    from runs.models import Event, Run

    def say(msg: str) -> None:
        print(msg, flush=True)

    rng = random.Random(args.seed)
    with no_publishing():
        t0 = time.monotonic()
        templates = make_templates()
        big = make_big_run(args.big_run_events, templates["migrate_ok"])
        say(f"templates and the big run made by the engine in {time.monotonic() - t0:.1f}s")
    events_of = {
        name: Event.objects.filter(run_id=run_id).count() for name, run_id in templates.items()
    }
    counts = plan(
        events_of,
        runs=args.runs - len(templates) - 1,
        events=args.events,
        fixed_events=Event.objects.count(),
    )
    say("events per template: " + ", ".join(f"{k} {n}" for k, n in sorted(events_of.items())))
    say("clones: " + ", ".join(f"{k} {n:,}" for k, n in counts.items()))

    # Clone n is created at `now - offsets[n]`: spread over the days, oldest first,
    # the newest a minute ago.
    names = [name for name, n in counts.items() for _ in range(n)]
    rng.shuffle(names)
    now = timezone.now()
    span = timedelta(days=args.days).total_seconds()
    offsets = sorted((rng.uniform(60, span) for _ in names), reverse=True)
    created_at = dict(Run.objects.filter(pk__in=templates.values()).values_list("id", "created_at"))
    changes = {
        run_id: run_input["change_id"]
        for run_id, run_input in Run.objects.filter(pk__in=templates.values()).values_list(
            "id", "input"
        )
        if "change_id" in run_input
    }
    t0 = time.monotonic()
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL synchronous_commit = off")
        cursor.execute(
            "CREATE TEMP TABLE clone (n int PRIMARY KEY, template uuid NOT NULL, "
            "run_id uuid NOT NULL DEFAULT gen_random_uuid(), shift interval NOT NULL, "
            "change_id text, change_from text NOT NULL, change_to text NOT NULL) "
            "ON COMMIT DROP"
        )
        copying = "COPY clone (n, template, shift, change_id, change_from, change_to) FROM STDIN"
        with cursor.cursor.copy(copying) as copy:
            for n, (name, offset) in enumerate(zip(names, offsets, strict=True)):
                template = templates[name]
                shift = now - timedelta(seconds=offset) - created_at[template]
                old = changes.get(template)
                if old is None:  # not a merge: nothing to replace
                    copy.write_row((n, template, shift, None, "", ""))
                else:
                    new = str(CHANGE_BASE + n)
                    # jsonb's text: `"change_id": 4242` (a key, a colon, a space).
                    copy.write_row(
                        (n, template, shift, new, f'"change_id": {old}', f'"change_id": {new}')
                    )
        cursor.execute("ANALYZE clone")
        say(f"cloning {len(names):,} runs:")
        clone(cursor, say)
        cursor.execute("SELECT DISTINCT ON (template) run_id FROM clone ORDER BY template, n")
        first_clones = [row[0] for row in cursor.fetchall()]
    say(f"cloned in {time.monotonic() - t0:.1f}s")
    check_history(first_clones)
    return {
        "runs": Run.objects.count(),
        "events": Event.objects.count(),
        "big_run": str(big),
        "big_run_events": Event.objects.filter(run_id=big).count(),
        "unresolved_claims": Run.objects.filter(status="needs_reconciliation").count(),
    }


def check_history(run_ids: list[Any]) -> None:
    """The first clone of each template is reproduced by its own event log
    (docs/architecture.md#history-and-restore), as the engine's runs are: the ids, keys and
    payloads were mapped right."""
    from runs.record.history import verify_run

    problems = {str(run_id): verify_run(run_id) for run_id in run_ids}
    problems = {run_id: p for run_id, p in problems.items() if p}
    if problems:
        raise SystemExit(f"cloned runs that their events do not reproduce: {problems}")
    print(f"history check: {len(run_ids)} clones, one per template, reproduced by their events")


def seeded(cursor: Any) -> dict[str, Any] | None:
    """The marker of a complete seed, if the database has one."""
    cursor.execute("SELECT to_regclass(%s) IS NOT NULL", [uidb.SEED_TABLE])
    if not cursor.fetchone()[0]:
        return None
    cursor.execute(f"SELECT params FROM {uidb.SEED_TABLE} ORDER BY seeded_at DESC LIMIT 1")
    row = cursor.fetchone()
    return json.loads(row[0]) if row else None  # Django reads jsonb as text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database", help="default: <DATABASE_URL's name>_ui_bench")
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--big-run-events", type=int, default=2_000)
    parser.add_argument("--days", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=9, help="random seed")
    what = parser.add_mutually_exclusive_group()
    what.add_argument(
        "--force", action="store_true", help="empty the database's runs first, then seed"
    )
    what.add_argument(
        "--if-needed",
        action="store_true",
        help="do nothing if the database holds a complete seed of this size",
    )
    args = parser.parse_args()
    params = {"runs": args.runs, "events": args.events, "big_run_events": args.big_run_events}

    name = uidb.use_bench_database(args.database)
    uidb.setup_django()
    from django.core.management import call_command
    from django.db import connection

    from runs.models import Run

    call_command("migrate", verbosity=0)
    # The templates' retries, crashes and sweeps are on purpose: no log lines for them.
    logging.getLogger("runs").setLevel(logging.ERROR)
    with connection.cursor() as cursor:
        marker = seeded(cursor)
        if marker is not None and marker.get("requested") == params:
            if args.if_needed:
                print(f"database {name} is seeded already: {marker}")
                return
        if Run.objects.exists() and not args.force:
            raise SystemExit(
                f"database {name} holds runs already"
                + (f" (a seed: {marker})" if marker else "")
                + "; --force empties it and seeds again"
            )
        cursor.execute(f"DROP TABLE IF EXISTS {uidb.SEED_TABLE}")
        cursor.execute(f"TRUNCATE {', '.join(TABLES)} CASCADE")
    print(f"seeding database {name} (PostgreSQL {connection.pg_version})", flush=True)
    t0 = time.monotonic()
    result = seed(args)
    seeding = time.monotonic() - t0
    t1 = time.monotonic()
    connection.ensure_connection()
    with connection.cursor() as cursor:  # autocommit: VACUUM refuses a transaction
        cursor.execute("VACUUM ANALYZE")
    # What was asked for (what --if-needed compares), and what was made.
    result.update(
        requested=params,
        seconds=round(seeding, 1),
        vacuum_seconds=round(time.monotonic() - t1, 1),
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"CREATE TABLE {uidb.SEED_TABLE} (params jsonb NOT NULL, "
            "seeded_at timestamptz NOT NULL DEFAULT now())"
        )
        cursor.execute(f"INSERT INTO {uidb.SEED_TABLE} (params) VALUES (%s)", [json.dumps(result)])
    print(
        f"seeded {result['runs']:,} runs and {result['events']:,} events in {seeding:.0f}s "
        f"(VACUUM ANALYZE {result['vacuum_seconds']:.0f}s); the big run "
        f"{result['big_run']} has {result['big_run_events']:,} events"
    )


if __name__ == "__main__":
    main()
