"""Runs in the states bulk operations act on, made by the engine in-process."""

from __future__ import annotations

from typing import Any

from runs import engine
from runs.models import Run
from runs.states import RunStatus
from tests.support.factories import run_queued
from tests.support.workflows import FAIL_WHILE_FLAGGED


def failed_runs(monkeypatch: Any, count: int, start: int = 0) -> list[Run]:
    """`count` fails-while-flagged runs whose one idempotent step failed for good (its
    claim abandoned: a retry keeps its key)."""
    monkeypatch.setenv(FAIL_WHILE_FLAGGED, "1")
    runs = []
    for n in range(start, start + count):
        run = engine.submit_run(workflow="fails-while-flagged", input={"n": n})
        run_queued(run)
        run.refresh_from_db()
        assert run.status == RunStatus.FAILED, run.error
        runs.append(run)
    monkeypatch.delenv(FAIL_WHILE_FLAGGED)
    return runs


def active_runs(count: int) -> list[Run]:
    """`count` pure-chain runs, submitted and not started (pending): active."""
    return [engine.submit_run(workflow="pure-chain", input={}) for _ in range(count)]
