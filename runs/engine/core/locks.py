"""The run row's lock, taken first (docs/architecture.md, "Locks").

Every transaction of the engine locks the rows of one run in one order, so that no two
of them can wait for each other:

1. a transaction acting for an attempt (its start, finish, failure, recovery) locks the
   attempt, then what only that attempt may change: its step and its in-flight claims;
2. then the run row;
3. then the run's other steps (in id order when it locks several);
4. then the run's claims, then its signals.

A transaction that does not act for an attempt (cancel, retry, signal, resolution,
wait, compensation, timer) starts at 2: lock_run() first. Nothing holding a run row
ever waits for a row that an attempt owns (a running step, an in-flight claim), and no
transaction waits for two runs' rows (retention's batches take theirs SKIP LOCKED).

lock_run() takes the row FOR UPDATE, the strongest row lock: the start of an attempt
reads its run's status FOR KEY SHARE, which only FOR UPDATE blocks, so a transition that
may stop a run's steps from starting (cancel, fail, compensate) waits for starts in
flight and is seen by every start after it, at the row's newest version.
"""

from __future__ import annotations

import uuid

from runs.models import Run


def lock_run(run_id: uuid.UUID | str, *, skip_locked: bool = False) -> Run | None:
    """The run, locked FOR UPDATE until the end of the current transaction; None if no
    such run exists (or, with `skip_locked`, another transaction holds it: for sweeps,
    which come back to it). Call inside transaction.atomic(), before locking any of the
    run's steps (the attempt's own step excepted)."""
    return (
        Run.objects.select_for_update(of=("self",), skip_locked=skip_locked)
        .filter(pk=run_id)
        .first()
    )
