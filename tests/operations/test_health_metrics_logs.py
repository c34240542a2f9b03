"""Operations: health endpoints, /metrics and who may read it, log lines that
carry their context, and production settings that pass Django's deploy check."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys

import pytest
from django.test import override_settings

from config.logs import ContextFilter, JsonFormatter
from runs import engine
from runs.ops.logcontext import log_context, payload
from tests.support.places import ROOT

pytestmark = pytest.mark.django_db


def test_healthz_answers_without_a_login(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.mark.servers  # asks the session's broker and PostgreSQL
def test_readyz_checks_database_migrations_and_broker(client):
    response = client.get("/readyz")
    body = response.json()
    assert response.status_code == 200, body
    assert body["status"] == "ready"
    assert body["checks"]["database"]["ok"] and body["checks"]["broker"]["ok"]


@override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0", METRICS_TOKEN="s3cret-token")
def test_readyz_names_an_unreachable_broker_to_whoever_may_know(client):
    response = client.get("/readyz", HTTP_AUTHORIZATION="Bearer s3cret-token")
    body = response.json()
    assert response.status_code == 503 and body["status"] == "not ready"
    assert body["checks"]["database"]["ok"]
    assert not body["checks"]["broker"]["ok"] and "Error" in body["checks"]["broker"]["error"]


DATABASE_ERROR = (
    'connection to server at "db.internal" (10.0.0.5), port 5432 failed: '
    'FATAL:  password authentication failed for user "durable_owner"'
)


@pytest.fixture
def database_down(monkeypatch):
    """The database check fails as psycopg does, naming host, address, port and role."""
    from django.db import OperationalError

    from config import health

    def refused() -> dict:
        raise OperationalError(DATABASE_ERROR)

    monkeypatch.setitem(health.CHECKS, "database", refused)
    # After a real failure the check drops its connection; here that is the test's own.
    monkeypatch.setattr(health.connection, "close_if_unusable_or_obsolete", lambda: None)


def test_readyz_tells_an_anonymous_caller_only_what_is_down(client, database_down, caplog):
    caplog.set_level(logging.WARNING)

    response = client.get("/readyz")

    assert response.status_code == 503
    assert response.json() == {
        "status": "not ready",
        "checks": {"database": {"ok": False}, "broker": {"ok": True}},
    }
    # The details are in the log, for whoever runs the service.
    assert "db.internal" in caplog.text and "durable_owner" in caplog.text


@override_settings(METRICS_TOKEN="s3cret-token")
def test_readyz_details_for_an_operator_or_the_metrics_token(
    client, database_down, operator, viewer
):
    token = client.get("/readyz", HTTP_AUTHORIZATION="Bearer s3cret-token").json()
    assert token["checks"]["database"]["error"] == f"OperationalError: {DATABASE_ERROR}"
    wrong = client.get("/readyz", HTTP_AUTHORIZATION="Bearer nope").json()
    assert "error" not in wrong["checks"]["database"]
    client.force_login(viewer)
    assert "error" not in client.get("/readyz").json()["checks"]["database"]
    client.force_login(operator)
    assert "db.internal" in client.get("/readyz").json()["checks"]["database"]["error"]


def test_metrics_refused_to_an_address_outside_the_allowed_networks(client):
    response = client.get("/metrics", REMOTE_ADDR="10.1.2.3")
    assert response.status_code == 403
    assert b"METRICS_TOKEN" in response.content


@override_settings(METRICS_TOKEN="s3cret-token")
def test_metrics_with_the_token_from_anywhere(client):
    assert client.get("/metrics", REMOTE_ADDR="10.1.2.3").status_code == 403
    wrong = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 403
    ok = client.get("/metrics", REMOTE_ADDR="10.1.2.3", HTTP_AUTHORIZATION="Bearer s3cret-token")
    assert ok.status_code == 200


@override_settings(TRUSTED_PROXY_COUNT=1)
def test_metrics_behind_a_proxy_need_the_token_even_from_this_host(client):
    """The proxy is on this host: every request it forwards comes from 127.0.0.1."""
    for forwarded in ({}, {"HTTP_X_FORWARDED_FOR": "203.0.113.5"}):
        response = client.get("/metrics", REMOTE_ADDR="127.0.0.1", **forwarded)
        assert response.status_code == 403, forwarded
        assert b"TRUSTED_PROXY_COUNT" in response.content
    with override_settings(METRICS_TOKEN="s3cret-token"):
        ok = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-token")
        assert ok.status_code == 200


def test_metrics_refuse_a_request_a_proxy_forwarded_though_none_is_configured(client):
    forwarded = client.get("/metrics", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="1.2.3.4")
    assert forwarded.status_code == 403
    assert client.get("/metrics", REMOTE_ADDR="127.0.0.1").status_code == 200


def metric_value(text: str, name: str, **labels: str) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return float(sample.value)
    return None


def test_metrics_read_queue_and_runs_from_the_database(client):
    text = client.get("/metrics").content.decode()  # the test client is 127.0.0.1
    assert metric_value(text, "durable_runs_unresolved_claims") == 0
    assert metric_value(text, "durable_runs_runs", status="pending") == 0
    engine.submit_run(workflow="charge-payment", input={"amount": 3})
    text = client.get("/metrics").content.decode()
    assert metric_value(text, "durable_runs_runs", status="pending") == 1
    # Every metric docs/operating.md names exists, with its labels.
    for name in (
        "durable_runs_steps_total",
        "durable_runs_attempts_recovered_total",
        "durable_runs_step_duration_seconds",
        "durable_runs_step_queue_wait_seconds",
        "durable_runs_probe_outcomes_total",
        "durable_runs_retention_rows_total",
        "durable_runs_oldest_unresolved_claim_age_seconds",
        "durable_runs_worker_processes",
    ):
        assert f"# TYPE {name} " in text, name


def record(message: str, **extra) -> logging.LogRecord:
    rec = logging.makeLogRecord({"msg": message, "levelname": "INFO", "name": "t", **extra})
    ContextFilter().filter(rec)
    return rec


def test_json_lines_carry_the_bound_context():
    with log_context(run_id="r-1", step="charge", attempt=2, worker="w@h"):
        line = JsonFormatter().format(record("step charge attempt 2 succeeded", ms=3.5))
    entry = json.loads(line)
    assert entry["message"] == "step charge attempt 2 succeeded"
    assert (entry["run_id"], entry["step"], entry["attempt"], entry["worker"]) == (
        "r-1",
        "charge",
        2,
        "w@h",
    )
    assert entry["ms"] == 3.5 and entry["level"] == "INFO"
    # Outside the block nothing is left behind.
    assert "run_id" not in json.loads(JsonFormatter().format(record("later")))


def test_a_refused_request_is_logged_without_its_query_string(client, caplog):
    caplog.set_level(logging.WARNING, logger="django.request")
    response = client.get("/api/runs/", {"workflow": "secret-" + "x" * 5000})
    assert response.status_code == 400
    warning = next(r for r in caplog.records if r.name == "django.request")
    entry = json.loads(JsonFormatter().format(warning))
    assert entry["request"] == "GET /api/runs/" and entry["status_code"] == 400
    assert "secret" not in json.dumps(entry)


def test_payloads_stay_out_of_logs_unless_allowed(settings):
    settings.RUNS_LOG_PAYLOADS = False
    assert "not logged" in payload({"card": "4242"}) and "4242" not in payload({"card": "4242"})
    settings.RUNS_LOG_PAYLOADS = True
    assert payload({"card": "4242"}) == {"card": "4242"}


def test_a_request_gets_an_id_and_its_log_lines_the_user(operator_client, caplog):
    caplog.set_level(logging.INFO, logger="durable_runs.request")
    response = operator_client.get("/runs/", HTTP_X_REQUEST_ID="req-abc.1")
    assert response["X-Request-ID"] == "req-abc.1"
    line = next(r for r in caplog.records if r.name == "durable_runs.request")
    assert line.context["request_id"] == "req-abc.1"
    assert line.context["user"] == "olivia" or line.context["user"]
    assert line.status == 200
    # A header that is not a sane token is replaced, never echoed.
    odd = operator_client.get("/runs/", HTTP_X_REQUEST_ID="<script>")
    assert odd["X-Request-ID"] != "<script>" and len(odd["X-Request-ID"]) == 32


def test_a_token_request_log_lines_name_its_user(operator, monkeypatch, caplog):
    """DRF authenticates a token inside the view, after the request's context was bound:
    the lines written from then on, and the access line, still name the user."""
    from redis.exceptions import RedisError

    from api.throttling import UserThrottle
    from tests.support.api import token_client

    class Unreachable:
        def get(self, key: str, default: object = None) -> object:
            raise RedisError("connection refused")

    # The throttle logs a warning from inside the view when its cache is down.
    monkeypatch.setattr(UserThrottle, "cache", Unreachable())
    caplog.set_level(logging.INFO)

    response = token_client(operator).get("/api/runs/", HTTP_X_REQUEST_ID="tok-1")

    assert response.status_code == 200
    lines = [r for r in caplog.records if getattr(r, "context", {}).get("request_id") == "tok-1"]
    warning = next(r for r in lines if "throttle skipped" in r.getMessage())
    access = next(r for r in lines if r.name == "durable_runs.request")
    assert (warning.context.get("user"), access.context.get("user")) == ("olivia", "olivia")


def run_django(env_extra: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    # The test session's own switches (the browser tests' DJANGO_ALLOW_ASYNC_UNSAFE, say)
    # are not a deployment's.
    unset = ("DEBUG", "LOG_FORMAT", "HTTPS", "DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(env_extra)
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": "q8V2x-" + "k3j9Lm4pR7tW1zY6bN0cF5hD8gS2aE4uI7oP3lK9" * 2,
    "HTTPS": "1",
    "ALLOWED_HOSTS": "runs.example.com",
}


def test_production_settings_pass_the_deploy_check():
    done = run_django(PRODUCTION, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "WARNING" not in done.stderr + done.stdout and "?:" not in done.stderr
    assert "System check identified no issues" in done.stdout


def test_without_https_the_deploy_check_fails():
    done = run_django({**PRODUCTION, "HTTPS": "0"}, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode != 0 and "SECURE_SSL_REDIRECT" in done.stderr + done.stdout


def test_deploy_check_flags_a_proxy_whose_clients_all_share_its_address():
    behind = {**PRODUCTION, "SECURE_PROXY_SSL_HEADER": "1"}
    done = run_django(behind, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode != 0 and "durable_runs.W001" in done.stderr + done.stdout
    configured = {**behind, "TRUSTED_PROXY_COUNT": "1", "METRICS_TOKEN": "m" * 32}
    done = run_django(configured, "check", "--deploy", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_wrong_log_format_is_one_clear_line():
    done = run_django({"LOG_FORMAT": "xml"}, "check")
    assert done.returncode != 0 and "LOG_FORMAT must be json or plain, not 'xml'" in done.stderr


@pytest.mark.servers  # asks the session's broker and PostgreSQL
def test_check_health_command_for_containers():
    from tests.support.places import database_url_for_tests

    db = {"DATABASE_URL": database_url_for_tests()}
    done = run_django(db, "check_health")
    assert done.returncode == 0 and done.stdout.startswith("ok: database, broker"), done.stderr
    bad = run_django({**db, "CELERY_BROKER_URL": "redis://127.0.0.1:1/0"}, "check_health")
    assert bad.returncode == 1 and bad.stderr.startswith("broker: ")
