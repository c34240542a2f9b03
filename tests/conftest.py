"""Test set-up: real PostgreSQL (pytest-django's test database on DATABASE_URL, or
the embedded server `make test` starts), a real broker, and real Celery worker
processes started per test (tests/integration/harness.py)."""

from __future__ import annotations

import os
import uuid

# Each test session gets its own queue, so it never eats (or is fed) another
# session's messages on a shared broker. Set before Django reads its settings.
_session = uuid.uuid4().hex[:8]
os.environ.setdefault("RUNS_QUEUE", f"durable-runs-test-{_session}")
os.environ.setdefault("RUNS_TEST_DATABASE", f"test_durable_runs_{_session}")

import pytest

from tests.integration.harness import Cluster


@pytest.fixture
def cluster(transactional_db, tmp_path):
    """Start and stop real worker and beat processes against the test database."""
    from config.celery import app

    app.control.purge()
    cluster = Cluster(tmp_path)
    try:
        yield cluster
    finally:
        cluster.stop_all()
        app.control.purge()
