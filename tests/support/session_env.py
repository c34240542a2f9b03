"""pytest plugin (loaded with `-p tests.support.session_env`, before pytest-django reads the
settings): a queue and a test database per test session, so concurrent sessions on one
broker or one PostgreSQL server never consume each other's messages or drop each
other's database; and a SECRET_KEY, which the settings require.

Under pytest-xdist each worker process (gw0, gw1, …) is a session of its own: it
inherits the controller's names and adds its id, so two workers share no queue, no
cache prefix and no database (pytest-django suffixes the test database the same way)."""

import os
import uuid

_session = uuid.uuid4().hex[:8]
os.environ.setdefault("RUNS_QUEUE", f"durable-runs-test-{_session}")
os.environ.setdefault("RUNS_TEST_DATABASE", f"test_durable_runs_{_session}")
# The API's throttle counts (the shared cache) are kept apart per session too, and
# tests clear only their own (tests/conftest.py).
os.environ.setdefault("API_CACHE_PREFIX", f"durable-runs-test-{_session}")
_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _worker and not os.environ["RUNS_QUEUE"].endswith(f"-{_worker}"):
    os.environ["RUNS_QUEUE"] += f"-{_worker}"
    os.environ["API_CACHE_PREFIX"] += f"-{_worker}"
    os.environ["RUNS_TEST_DATABASE"] += f"_{_worker}"
# The sweeper's back-off reads the broker's queue depth, which here holds every test's
# messages: the tests that are about it turn it on (and empty the queue first).
os.environ.setdefault("RUNS_REPUBLISH_BACKOFF", "0")
os.environ.setdefault(
    "RUNS_WORKFLOW_MODULES",
    "examples.workflows,tests.support.workflows,tests.support.timeout_workflows,"
    "tests.support.limit_workflows,tests.support.deadline_workflows",
)
# The settings refuse to start without one (unless DEBUG); worker processes inherit it.
os.environ.setdefault("SECRET_KEY", f"test-only-{uuid.uuid4().hex}")
