"""The monitoring that ships in docker/: the alert rules pass promtool's checks and its
unit tests (docker/prometheus/alerts_test.yml), Prometheus's and compose's files are
valid, the Grafana dashboard parses, and every metric the rules and the dashboard read
is one the service's /metrics exposes (docs/operating.md#alerts).

promtool is Debian's `prometheus` package (/usr/bin/promtool). Without it a newcomer's
`make test` skips the promtool tests with one line saying how to get it; with CI set a
missing promtool is a failure (.ci/run installs it)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from typing import Any

import pytest
import yaml

from tests.support.places import ROOT

DOCKER = ROOT / "docker"
RULES = DOCKER / "prometheus" / "alerts.yml"
RULE_TESTS = DOCKER / "prometheus" / "alerts_test.yml"
PROMETHEUS = DOCKER / "prometheus" / "prometheus.yml"
DASHBOARD = DOCKER / "grafana" / "durable-runs.json"
COMPOSE = DOCKER / "compose.yaml"

# Gauges another change adds: none now (the pauses' gauges are in, runs/ops/metrics.py).
NOT_YET_EXPOSED: set[str] = set()
# Made by Prometheus itself for each scrape target, never by the service.
FROM_PROMETHEUS = {"up"}


@pytest.fixture(scope="module")
def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        message = "promtool not found: `apt-get install prometheus` to run the alert rule tests"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return found


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, timeout=120, check=False)


def test_the_rules_pass_promtools_check(promtool):
    result = run(promtool, "check", "rules", str(RULES))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 9 rules found" in result.stdout


def test_each_alert_fires_and_stays_quiet_as_its_unit_tests_say(promtool):
    result = run(promtool, "test", "rules", str(RULE_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_the_prometheus_config_is_valid(promtool):
    # --syntax-only: the token file exists only inside the container.
    result = run(promtool, "check", "config", "--syntax-only", str(PROMETHEUS))
    assert result.returncode == 0, result.stdout + result.stderr


def alerts() -> list[dict[str, Any]]:
    return [
        rule for group in yaml.safe_load(RULES.read_text())["groups"] for rule in group["rules"]
    ]


def test_every_alert_is_unit_tested_and_explained_in_the_runbook():
    tested = {
        case["alertname"]
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
        if case["exp_alerts"]
    }
    quiet = {
        case["alertname"]
        for test in yaml.safe_load(RULE_TESTS.read_text())["tests"]
        for case in test["alert_rule_test"]
        if not case["exp_alerts"]
    }
    runbook = (ROOT / "docs" / "operating.md").read_text()
    for rule in alerts():
        name = rule["alert"]
        assert name in tested, f"{name}: no unit test where it fires"
        assert name in quiet, f"{name}: no unit test where it stays quiet"
        notes = rule["annotations"]
        assert notes["summary"] and notes["description"], name
        assert notes["runbook_url"] == f"docs/operating.md#{name.lower()}", name
        # The anchor GitHub makes of the heading "### DurableRunsX".
        assert f"\n### {name}\n" in runbook, f"{name}: no section in docs/operating.md"


def test_compose_stays_valid_and_mounts_files_that_exist():
    compose = yaml.safe_load(COMPOSE.read_text())
    services = compose["services"]
    assert {"postgres", "redis", "web", "worker", "beat", "prometheus", "grafana"} <= set(services)
    # Clients reach the web tier through the buffering proxy only, which the app counts
    # as one proxy (docs/operating.md, "Production (docker/)").
    assert "ports" not in services["web"]
    assert services["proxy"]["ports"] == ["8000:80"]
    assert services["proxy"]["volumes"] == [
        "./nginx/durable-runs.conf:/etc/nginx/conf.d/default.conf:ro"
    ]
    assert compose["x-app"]["environment"]["TRUSTED_PROXY_COUNT"] == "${TRUSTED_PROXY_COUNT:-1}"
    # The monitoring services are opt-in; the default stack is what it was.
    assert services["prometheus"]["profiles"] == ["monitoring"]
    assert services["grafana"]["profiles"] == ["monitoring"]
    for name in ("prometheus", "grafana", "proxy"):
        for volume in services[name]["volumes"]:
            source = volume.split(":")[0]
            if source.startswith("./"):
                assert (DOCKER / source).exists(), f"{name} mounts {source}, which is missing"
        for dependency in services[name].get("depends_on", []):
            assert dependency in services
    for volume in ("promdata", "grafanadata"):
        assert volume in compose["volumes"]
    # What Prometheus scrapes is what compose runs.
    scrape = yaml.safe_load(PROMETHEUS.read_text())["scrape_configs"]
    jobs = {job["job_name"]: job for job in scrape}
    assert jobs["durable-runs-web"]["static_configs"][0]["targets"] == ["web:8000"]
    worker_port = services["worker"]["environment"]["RUNS_WORKER_METRICS_PORT"]
    assert jobs["durable-runs-worker"]["dns_sd_configs"][0]["port"] == int(worker_port)
    # The web answers the name Prometheus scrapes it by.
    assert ",web}" in compose["x-app"]["environment"]["ALLOWED_HOSTS"]


def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text())


def test_the_dashboard_parses_and_every_panel_queries_prometheus():
    board = dashboard()
    assert board["uid"] == "durable-runs"
    panels = [p for p in board["panels"] if p["type"] != "row"]
    titles = {p["title"] for p in panels}
    for title in (
        "Steps started and succeeded",
        "Step outcomes",
        "Unresolved claims",
        "Oldest unresolved claim",
        "Queued steps",
        "Paused work",
        "Time since each policy's last purge",
        "Webhook deliveries",
    ):
        assert title in titles
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    for panel in panels:
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["expr"] and target["datasource"]["type"] == "prometheus"


METRIC = re.compile(r"\b([a-zA-Z_:][a-zA-Z0-9_:]*)\b\s*(?=[{\[)\s]|$)")


def metric_names(expression: str) -> set[str]:
    """The series names an expression reads: durable_runs_* and Prometheus's `up`."""
    without_strings = re.sub(r'"[^"]*"', '""', expression)
    return {
        name
        for name in METRIC.findall(without_strings)
        if name.startswith("durable_runs_") or name in FROM_PROMETHEUS
    }


def used_by_rules() -> set[str]:
    names: set[str] = set()
    for rule in alerts():
        names |= metric_names(rule["expr"])
        for text in rule["annotations"].values():
            for query in re.findall(r'query "([^"]+)"', text):
                names |= metric_names(query)
    return names


def used_by_dashboard() -> set[str]:
    return {
        name
        for panel in dashboard()["panels"]
        for target in panel.get("targets", [])
        for name in metric_names(target["expr"])
    }


def exposed(text: str) -> set[str]:
    """Series names /metrics can carry: its families, with a histogram's three series."""
    names: set[str] = set()
    for name, kind in re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE):
        names.add(name)
        if kind == "histogram":
            names |= {f"{name}_bucket", f"{name}_sum", f"{name}_count"}
    return names


@pytest.mark.django_db
def test_every_metric_the_rules_and_the_dashboard_read_is_exposed(client):
    text = client.get("/metrics").content.decode()  # the test client is 127.0.0.1
    available = exposed(text) | FROM_PROMETHEUS | NOT_YET_EXPOSED
    rules, board = used_by_rules(), used_by_dashboard()
    assert "durable_runs_oldest_unresolved_claim_age_seconds" in rules  # the parser works
    assert "durable_runs_step_duration_seconds_bucket" in board
    assert rules - available == set()
    assert board - available == set()
    # Each of the service's own metrics is on the dashboard.
    ours = {
        n for n in exposed(text) if n.startswith("durable_runs_") and not n.endswith("_created")
    }
    histograms = {n for n in ours if f"{n}_bucket" in ours}
    parts = {f"{h}_{s}" for h in histograms for s in ("bucket", "sum", "count")}
    assert ours - histograms - parts - board == set()


def gauge(text: str, name: str, **labels: str) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


@pytest.mark.django_db
def test_the_gauges_the_alerts_read_say_what_the_database_holds(client):
    from django.db import connection

    from runs import engine
    from runs.models import RetentionPolicy, RetentionPurge, Step
    from runs.states import StepStatus

    text = client.get("/metrics").content.decode()
    assert gauge(text, "durable_runs_queued_steps") == 0
    assert gauge(text, "durable_runs_oldest_queued_step_age_seconds") == 0

    run = engine.submit_run(workflow="charge-payment", input={"amount": 3})
    queued = Step.objects.filter(run=run, status=StepStatus.QUEUED)
    assert queued.count() == 1
    with connection.cursor() as cursor:  # queued two minutes ago, on the database's clock
        cursor.execute(
            "UPDATE runs_step SET queued_at = now() - interval '120 seconds' WHERE id = %s",
            [queued.get().id],
        )
    text = client.get("/metrics").content.decode()
    assert gauge(text, "durable_runs_queued_steps") == 1
    assert 120 <= gauge(text, "durable_runs_oldest_queued_step_age_seconds") < 180

    # A cancelled run's queued step waits for nothing: it goes back to pending, and
    # is neither counted nor its age.
    step = queued.get()
    engine.cancel_run(run_id=run.id, actor="ann", reason="r")
    assert Step.objects.get(pk=step.pk).status == StepStatus.PENDING
    text = client.get("/metrics").content.decode()
    assert gauge(text, "durable_runs_queued_steps") == 0
    assert gauge(text, "durable_runs_oldest_queued_step_age_seconds") == 0
    live = engine.submit_run(workflow="charge-payment", input={"amount": 4})
    with connection.cursor() as cursor:  # the live run's step, ready 30 s ago
        cursor.execute(
            "UPDATE runs_step SET queued_at = now() - interval '30 seconds' WHERE run_id = %s",
            [live.id],
        )
    text = client.get("/metrics").content.decode()
    assert gauge(text, "durable_runs_queued_steps") == 1
    assert 30 <= gauge(text, "durable_runs_oldest_queued_step_age_seconds") < 90

    # Retention: per enabled policy, since its last completed purge (a preview is none).
    RetentionPolicy.objects.all().delete()
    kept = RetentionPolicy.objects.create(name="kept", workflow="")
    RetentionPolicy.objects.create(name="off", workflow="w", enabled=False)
    fresh = RetentionPolicy.objects.create(name="fresh", workflow="charge-payment")
    with connection.cursor() as cursor:
        cursor.execute("UPDATE runs_retentionpolicy SET created_at = now() - interval '10 hours'")
    text = client.get("/metrics").content.decode()
    name = "durable_runs_retention_last_purge_age_seconds"
    assert 36000 <= gauge(text, name, policy="kept") < 36060  # never purged: since created
    assert gauge(text, name, policy="off") is None
    with connection.cursor() as cursor:
        cursor.execute(
            "INSERT INTO runs_retentionpurge (policy_id, policy_name, dry_run, started_at, "
            "finished_at, counts, batches) VALUES "
            "(%(kept)s, 'kept', false, now() - interval '2 hours', now() - interval '2 hours', "
            "'{}', 0), "
            "(%(kept)s, 'kept', true, now(), now(), '{}', 0), "
            "(%(kept)s, 'kept', false, now(), NULL, '{}', 0), "  # cut short: no finish
            "(%(fresh)s, 'fresh', false, now(), now(), '{}', 0)",
            {"kept": kept.id, "fresh": fresh.id},
        )
    assert RetentionPurge.objects.count() == 4
    text = client.get("/metrics").content.decode()
    assert 7200 <= gauge(text, name, policy="kept") < 7260
    assert 0 <= gauge(text, name, policy="fresh") < 60
