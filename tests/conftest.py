"""Test set-up: real PostgreSQL (pytest-django's test database on DATABASE_URL, or
the embedded server `make test` starts), a real broker, and real Celery worker
processes started per test (tests/integration/harness.py)."""

from __future__ import annotations

import os
from importlib import import_module

import pytest
from django.conf import settings

from runs.tools.processes import delete_queues
from tests.integration.harness import Cluster

# tests/support/session_env.py (a -p plugin) names this session's queue and test database.
assert settings.CELERY_TASK_DEFAULT_QUEUE.startswith("durable-runs-test-"), "plugin not loaded"


def pytest_collection_modifyitems(items):
    """A test that starts real workers, or sits in tests/integration, depends on the
    session's broker and PostgreSQL (marker `servers`): `make test-integration` runs
    those, on another broker."""
    for item in items:
        integration = "integration" in item.path.parts[-3:-1]
        if integration or "cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.workers)
        if item.get_closest_marker("workers"):
            item.add_marker(pytest.mark.servers)


_used_the_broker: list[bool] = []


@pytest.fixture(scope="session", autouse=True)
def _session_queues():
    """At the end, this session's queues go (RUNS_QUEUE is per session), if a test used
    them: a RabbitMQ keeps durable queues, and their exchange, until someone deletes
    them."""
    yield
    if not _used_the_broker:
        return
    delete_queues(settings.CELERY_TASK_DEFAULT_QUEUE)


def django_db_blocker_unblocked(request):
    """pytest-django's database blocker, lifted for a session fixture's own queries."""
    return request.getfixturevalue("django_db_blocker").unblock()


@pytest.fixture(scope="session", autouse=True)
def _through_pgbouncer(request, tmp_path_factory):
    """TEST_DATABASE_POOLER=pgbouncer: after the test database is made, everything in
    this session reaches it through a PgBouncer of its own in transaction mode (Debian's,
    tests/integration/servers.py), as a deployment behind one does (docs/operating.md,
    "PgBouncer"): this process, the workers it starts (they inherit the URL with
    `?pooler=pgbouncer`) and every connection a test opens from the settings. Its pool
    is smaller than the clients, so transactions of different clients share server
    sessions. Creating and dropping the test database go to the server directly."""
    if os.environ.get("TEST_DATABASE_POOLER", "") != "pgbouncer":
        yield
        return
    from django.db import connections

    from tests.integration.servers import PrivatePgBouncer

    request.getfixturevalue("django_db_setup")
    handle = connections["default"]
    direct = dict(handle.settings_dict)
    pooler = PrivatePgBouncer(
        tmp_path_factory.mktemp("pgbouncer"),
        direct,
        alias=direct["NAME"],  # the same name: tests that look the database up find it
        others=True,
        default_pool_size="4",
        max_client_conn="200",
        ignore_startup_parameters="extra_float_digits",
    )
    pooler.start()
    handle.close()
    options = {k: v for k, v in direct["OPTIONS"].items() if k != "options"}
    handle.settings_dict.update(
        pooler.through(direct),
        POOLER="pgbouncer",
        DISABLE_SERVER_SIDE_CURSORS=True,
        OPTIONS=options,
    )
    # Proof that this session's connections go through it: PgBouncer answers cancel
    # requests itself, so the pid it gave the client is not the server session's.
    with django_db_blocker_unblocked(request):
        handle.ensure_connection()
        with handle.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            assert cursor.fetchone()[0] != handle.connection.info.backend_pid, "not pooled"
        handle.close()
    try:
        yield pooler
    finally:
        for each in connections.all():
            each.close()
        handle.settings_dict.clear()
        handle.settings_dict.update(direct)
        pooler.stop()


@pytest.fixture
def cluster(transactional_db, tmp_path):
    """Start and stop real worker and beat processes against the test database."""
    from config.celery import app

    _used_the_broker.append(True)
    app.control.purge()
    cluster = Cluster(tmp_path)
    try:
        yield cluster
    finally:
        cluster.stop_all()
        app.control.purge()


@pytest.fixture(autouse=True)
def _history_reproduces_rows(request):
    """Every run a test creates must be reproducible from its event log
    (docs/architecture.md#history-and-restore).
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
    _events_read_through_the_catalogue()
    if request.node.get_closest_marker("tampers"):
        return
    from runs.models import Run
    from runs.record.history import verify_run

    problems = {str(run.id): verify_run(run) for run in Run.objects.all()}
    assert not {k: v for k, v in problems.items() if v}, problems


def _events_read_through_the_catalogue():
    """Every event a test leaves, however it was written (append_event, or SQL of its
    own), reads strictly through the catalogue (docs/architecture.md#the-event-catalogue):
    a known type, no key the catalogue does not know, none it needs missing, and the
    payload the catalogue would write for it is the one stored."""
    from runs.models import Event
    from runs.record import events

    problems = []
    rows = Event.objects.values_list("run_id", "seq", "type", "payload", "schema_version")
    for run_id, seq, type_, payload, version in rows.iterator():
        try:
            event = events.read(type_, payload, version, strict=True)
        except events.CatalogueError as exc:
            problems.append(f"run {run_id} seq {seq}: {exc}")
            continue
        if event.as_payload() != payload:
            problems.append(f"run {run_id} seq {seq}: {payload} is written {event.as_payload()}")
    assert not problems, problems


def _database_fixture(request) -> str | None:
    """Which of pytest-django's database fixtures the test runs in, asked for by name,
    through a fixture (a live server is transactional) or by its django_db marker."""
    marker = request.node.get_closest_marker("django_db")
    names = request.fixturenames
    if (
        "transactional_db" in names
        or "live_server" in names
        or (marker is not None and marker.kwargs.get("transaction"))
    ):
        return "transactional_db"
    if "db" in names or marker is not None:
        return "db"
    return None


@pytest.fixture(autouse=True)
def _rows_the_migrations_seed(request):
    """The rows the migrations seed (the default retention policy) are there in every
    test with the database, whatever ran before it: a transactional test's flush empties
    every table, and under pytest-xdist such a test may run before one that counts on
    them (serially, pytest-django happens to run every `db` test first)."""
    database = _database_fixture(request)
    if database is None:
        return
    request.getfixturevalue(database)
    from django.apps import apps

    import_module("runs.migrations.0013_retention_operators").default_policy(apps, None)


@pytest.fixture(autouse=True)
def _fresh_throttles(request):
    """Each test starts with no API throttle counts (they live in the shared cache)."""
    from django.core.cache import caches
    from django.core.cache.backends.db import DatabaseCache

    if not isinstance(caches["default"], DatabaseCache):
        clear_cache()
        yield
        return
    # In the test database: a test inside a transaction leaves no count behind, and one
    # whose transactions commit clears what it counted when it ends.
    if _database_fixture(request) != "transactional_db":
        yield
        return
    request.getfixturevalue("transactional_db")
    yield
    clear_cache()


def clear_cache() -> None:
    """Delete this session's keys from the default cache. Never FLUSHDB: a Redis cache
    may share its database with the broker (config/settings.py). A database cache is in
    this session's test database: all of it is this session's."""
    from django.core.cache import caches
    from django.core.cache.backends.redis import RedisCache

    cache = caches["default"]
    if not isinstance(cache, RedisCache):
        cache.clear()
        return
    from redis.exceptions import RedisError

    try:
        client = cache._cache.get_client(write=True)
        keys = list(client.scan_iter(match=f"{cache.key_prefix}:*"))
        if keys:
            client.delete(*keys)
    except (RedisError, OSError):
        pass  # unreachable: nothing counted there either (the throttles fail open)


# --- accounts with roles (runs/roles.py) ---------------------------------------------
PASSWORD = "a long test passphrase 42"


def make_user(name: str, role: str | None) -> object:
    from django.contrib.auth.models import User

    from runs.management.commands.createoperator import grant_role

    user = User.objects.create_user(name, password=PASSWORD)
    if role is not None:
        grant_role(user, role)
    return user


@pytest.fixture
def operator(db):
    return make_user("olivia", "operators")


@pytest.fixture
def viewer(db):
    return make_user("victor", "viewers")


@pytest.fixture
def submitter(db):
    """A service account: submits runs and reads them through the API."""
    return make_user("sam", "submitters")


@pytest.fixture
def nobody(db):
    """Logged in, but with no role: sees nothing (deny by default)."""
    return make_user("nadia", None)


@pytest.fixture
def operator_client(client, operator):
    client.force_login(operator)
    return client


@pytest.fixture
def viewer_client(client, viewer):
    client.force_login(viewer)
    return client
