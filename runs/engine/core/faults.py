"""Fault injection (docs/reliability.md#fault-injection): the worker process kills itself with
SIGKILL at a named point, so crash tests exercise real process death rather than an
exception.

    RUNS_ALLOW_FAULTS=1 RUNS_FAULTS="after_effect:migrate:120,after_commit:list_records"

Occurrences are counted per worker process. Ignored entirely unless
RUNS_ALLOW_FAULTS=1, so a stray variable in production can never kill a worker.
RUNS_DUPLICATE_MESSAGES=1 (same gate) publishes every step message twice.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections import Counter

POINTS = ("before_claim", "after_claim", "after_effect", "after_commit")

log = logging.getLogger(__name__)
_counts: Counter[tuple[str, str]] = Counter()


class SimulatedCrash(BaseException):
    """Raised instead of SIGKILL by runs.testing.run_inline. A BaseException, so that
    no `except Exception` of the engine or of a step can mistake it for a failure: like
    a killed process, it leaves whatever was committed and rolls back the rest."""


# Set by runs.testing.run_inline for the duration of a run: (point, step) -> nth, and
# the occurrences counted so far (per harness run, as per worker process for real).
_simulated: dict[tuple[str, str], int] | None = None
_simulated_counts: Counter[tuple[str, str]] = Counter()


def simulate(spec: dict[tuple[str, str], int] | None) -> None:
    """Turn in-process crash simulation on (a parsed spec) or off (None)."""
    global _simulated
    _simulated = spec
    _simulated_counts.clear()


def enabled() -> bool:
    return os.environ.get("RUNS_ALLOW_FAULTS") == "1"


def parse(spec: str) -> dict[tuple[str, str], int]:
    """`point:step[:nth]`, comma-separated → {(point, step): nth}."""
    faults: dict[tuple[str, str], int] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        fields = part.split(":")
        if len(fields) not in (2, 3) or fields[0] not in POINTS:
            raise ValueError(
                f"bad RUNS_FAULTS entry {part!r}: expected <point>:<step>[:<nth>] "
                f"with point one of {', '.join(POINTS)}"
            )
        nth = int(fields[2]) if len(fields) == 3 else 1
        if nth < 1:
            raise ValueError(f"bad RUNS_FAULTS entry {part!r}: nth must be >= 1")
        faults[(fields[0], fields[1])] = nth
    return faults


_parsed: tuple[str, dict[tuple[str, str], int]] = ("", {})


def _active() -> dict[tuple[str, str], int]:
    global _parsed
    if not enabled():
        return {}
    spec = os.environ.get("RUNS_FAULTS", "")
    if spec != _parsed[0]:  # parsed once per value, not at every point of every item
        _parsed = (spec, parse(spec))
    return _parsed[1]


def armed() -> bool:
    """Whether hit() can do anything now: a simulation is on, or faults are allowed and
    named. A loop asks once and skips its points when not (a map batch's items)."""
    return _simulated is not None or bool(_active())


def hit(point: str, step_name: str) -> None:
    """Mark that execution reached `point` for `step_name`; die here if told to."""
    if _simulated is not None:
        _simulated_counts[(point, step_name)] += 1
        nth = _simulated.get((point, step_name))
        if nth is not None and _simulated_counts[(point, step_name)] == nth:
            raise SimulatedCrash(f"{point}:{step_name}:{nth}")
        return
    faults = _active()
    if not faults:
        return
    _counts[(point, step_name)] += 1
    nth = faults.get((point, step_name))
    if nth is not None and _counts[(point, step_name)] == nth:
        log.warning("fault injection: SIGKILL at %s:%s:%d", point, step_name, nth)
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def message_copies() -> int:
    return 2 if enabled() and os.environ.get("RUNS_DUPLICATE_MESSAGES") == "1" else 1
