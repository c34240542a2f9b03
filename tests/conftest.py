"""Test set-up: real PostgreSQL (pytest-django's test database on DATABASE_URL, or
the embedded server `make test` starts), a real broker, and real Celery worker
processes started per test (tests/integration/harness.py)."""

from __future__ import annotations

import pytest
from django.conf import settings

from tests.integration.harness import Cluster

# tests/session_env.py (a -p plugin) names this session's queue and test database.
assert settings.CELERY_TASK_DEFAULT_QUEUE.startswith("durable-runs-test-"), "plugin not loaded"


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


@pytest.fixture(autouse=True)
def _history_reproduces_rows(request):
    """Every run a test creates must be reproducible from its event log (DESIGN.md §8).
    Tests that alter rows behind the engine's back are marked `tampers`."""
    names = request.fixturenames
    if "transactional_db" in names or "cluster" in names:
        request.getfixturevalue("transactional_db")
    elif "db" in names:
        request.getfixturevalue("db")
    else:
        yield
        return
    yield
    if request.node.get_closest_marker("tampers"):
        return
    from runs.history import verify_run
    from runs.models import Run

    problems = {str(run.id): verify_run(run) for run in Run.objects.all()}
    assert not {k: v for k, v in problems.items() if v}, problems
