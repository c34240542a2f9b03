"""The engine's second door: the hooks its tools and its tests need, not its verbs.

Only bench/, runs.tools.crashcheck, runs.testing and tests/ may import it (an import-linter
contract in pyproject.toml, and tests/engine/test_sql_files.py for bench/); everything
else goes through `runs.engine` (docs/architecture.md#the-engines-layers). What is here
is what the hot path, crash injection and the race tests reach for: an attempt started,
finished or recovered by hand, a lease renewed, the fault points, the publisher the
in-process harness replaces, the hot statements to EXPLAIN, and the modules the race
tests pause a transaction inside (monkeypatch needs the module that holds the name).
"""

from .attempts import finish as _finish
from .attempts import heartbeat
from .attempts import start as _start
from .attempts.claims import insert_claim
from .attempts.finish import fail_attempt, finish_with_result
from .attempts.items import _fence_item as fence_item
from .attempts.items import _transactional_item as transactional_item
from .attempts.items import completed_items, run_batch
from .attempts.lease import renew_lease
from .attempts.start import LeaseClock, Started, start_queued
from .core import faults, keys, publish
from .core.clock import kill_after, timeout_for
from .core.faults import SimulatedCrash
from .core.keys import step_claim_key
from .core.publish import publish_probes, step_queue_depth
from .core.timeouts import bounded
from .entry import execute as execute_module
from .entry.execute import _context_factory as context_factory
from .entry.execute import _still_owned_before_effect as still_owned_before_effect
from .entry.execute import run_attempt, start_attempt
from .policies import breaker as breaker_module
from .policies import operate as operate_module
from .policies import probe as probe_module
from .policies import recover as recover_module
from .policies import schedules as schedules_module
from .policies import submit as submit_module
from .policies import waits as waits_module
from .policies.recover import recover_attempt, republish_stale, settle_late_finish
from .policies.schedules import (
    db_now,
    due_ticks,
    next_tick_after,
    sync_declared_schedules,
    tick_key,
)
from .policies.waits import wake_due
from .state import ready as ready_module

# The hot path's two statements as PostgreSQL receives them, for tools that EXPLAIN them
# (bench/scale.py --explain).
HOT_STATEMENTS = {
    "start": _start.SQL["start"],
    "finish": _finish.SQL["succeed_and_dependents"],
}

__all__ = [
    "HOT_STATEMENTS",
    "LeaseClock",
    "SimulatedCrash",
    "Started",
    "bounded",
    "breaker_module",
    "completed_items",
    "context_factory",
    "db_now",
    "due_ticks",
    "execute_module",
    "fail_attempt",
    "faults",
    "fence_item",
    "finish_with_result",
    "heartbeat",
    "insert_claim",
    "keys",
    "kill_after",
    "next_tick_after",
    "operate_module",
    "probe_module",
    "publish",
    "publish_probes",
    "ready_module",
    "recover_attempt",
    "recover_module",
    "renew_lease",
    "republish_stale",
    "run_attempt",
    "run_batch",
    "schedules_module",
    "settle_late_finish",
    "start_attempt",
    "start_queued",
    "step_claim_key",
    "step_queue_depth",
    "still_owned_before_effect",
    "submit_module",
    "sync_declared_schedules",
    "tick_key",
    "timeout_for",
    "transactional_item",
    "waits_module",
    "wake_due",
]
