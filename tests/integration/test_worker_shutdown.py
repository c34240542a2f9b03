"""A worker told to stop (SIGTERM: `docker stop`, a rolling deploy) stops within
seconds on either broker, rather than sleeping through the grace an orchestrator gives
it before its SIGKILL."""

from __future__ import annotations

import time

import pytest

pytestmark = [pytest.mark.workers, pytest.mark.broker]

# About a second on either broker (config/celery.py, ShutdownPromptly); about ten on
# RabbitMQ without it, which is docker stop's whole grace.
STOPS_WITHIN_SECONDS = 6.0


def test_an_idle_worker_stops_within_seconds_of_sigterm(cluster):
    worker = cluster.worker()

    began = time.monotonic()
    worker.terminate()
    code = worker.wait_exit(timeout=30)
    took = time.monotonic() - began

    assert code == 0, worker.tail()
    assert took < STOPS_WITHIN_SECONDS, f"the worker took {took:.1f}s to stop\n{worker.tail()}"
