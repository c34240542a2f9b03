"""The run row's lock, taken first (docs/architecture.md, "Locks").

Every transaction of the engine locks the rows of one run in one order, and the run row
at the strength it will need from its first lock on it, so that no two of them can wait
for each other:

1. a transaction acting for an attempt (its start, finish, failure, recovery) locks the
   attempt, then what only that attempt may change: its step and its in-flight claims;
2. then the run row, at its final strength;
3. then the run's other steps (in id order when it locks several);
4. then the run's claims, then its signals.

A transaction that does not act for an attempt (cancel, retry, signal, resolution,
wait, compensation, timer) starts at 2: lock_run() first. Nothing holding a run row
ever waits for a row that an attempt owns (a running step, an in-flight claim), and no
transaction waits for two runs' rows (retention's batches take theirs SKIP LOCKED).

lock_run() takes the row FOR UPDATE, the strongest row lock. The other strengths the run
row is taken at: FOR NO KEY UPDATE by any UPDATE of it (the hot path's counters, the
event log's seq on every event appended, a status changed in passing) and FOR KEY SHARE
by the start of an attempt, which reads its run's status so in its statement and holds
it to its commit, and by the foreign-key check of any row inserted with a reference to
the run (an event, a step, an attempt, a claim; deferred to the commit). Only FOR UPDATE
blocks FOR KEY SHARE, so a transition that may stop a run's steps from starting
(cancel, fail, compensate) waits for starts in flight and is seen by every start after
it, at the row's newest version.

A transaction that will call lock_run() calls it before anything else it does locks the
run row: before its first event, counter or status write, or insert that refers to the
run. A start holds the row FOR KEY SHARE and writes its buffered events (FOR NO KEY
UPDATE) at its end; a transaction that wrote first and asked for FOR UPDATE after would
wait for that start while the start's events waited for it (a deadlock). A finish whose
success may fail its run (a dependent that is a map step or has a condition) therefore
takes its attempt and then the run before its statement (attempts/finish.py); the one
later lock_run() left is compensate_late_step's, where the run no longer goes on and no
start holds it with events to write.
"""

from __future__ import annotations

import uuid

from runs.models import Run


def lock_run(run_id: uuid.UUID | str, *, skip_locked: bool = False) -> Run | None:
    """The run, locked FOR UPDATE until the end of the current transaction; None if no
    such run exists (or, with `skip_locked`, another transaction holds it: for sweeps,
    which come back to it). Call inside transaction.atomic(), before locking any of the
    run's steps (the attempt's own step excepted), and before anything in the
    transaction takes the run's row more weakly (an event, a counter, an insert that
    refers to it)."""
    return (
        Run.objects.select_for_update(of=("self",), skip_locked=skip_locked)
        .filter(pk=run_id)
        .first()
    )
