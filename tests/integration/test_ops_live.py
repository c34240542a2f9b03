"""Operations against real processes: /readyz of a real web server whose
PostgreSQL is stopped and started again; metrics a real worker serves, moving when a
step runs, crashes and is recovered; a step's log line carrying its run and step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from runs import engine
from runs.models import Run
from runs.states import RunStatus
from tests.support.places import ROOT
from tests.support.waiting import wait_for

from .helpers import wait_settled
from .servers import PrivatePostgres, free_port, manage

pytestmark = pytest.mark.workers


def get_json(url: str, token: str = "") -> tuple[int, dict]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        with urllib.request.urlopen(
            urllib.request.Request(url, headers=headers), timeout=10
        ) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())
    except (TimeoutError, urllib.error.URLError, ConnectionError):
        return 0, {}


def test_readyz_follows_postgres_down_and_back(private_postgres: PrivatePostgres, tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": private_postgres.url,
        "RUNS_DB_CONNECT_TIMEOUT_SECONDS": "2",
        "DEBUG": "0",
        "METRICS_TOKEN": "readyz-details",
    }
    port = free_port()
    log = (tmp_path / "web.log").open("wb")
    web = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/readyz"
    try:
        # A fresh database: reachable, but not migrated yet. Why, only with the token.
        status, body = wait_for(lambda: (r := get_json(url))[0] and r, what="web to answer")
        assert status == 503 and body["checks"]["database"] == {"ok": False}
        status, body = get_json(url, token="readyz-details")
        assert status == 503 and "manage.py migrate" in body["checks"]["database"]["error"]
        manage(env, "migrate", "--noinput", timeout=300)
        status, body = get_json(url)
        assert status == 200 and body["status"] == "ready", body

        private_postgres.stop("immediate")
        status, body = get_json(url)
        assert status == 503 and not body["checks"]["database"]["ok"], body
        assert body["checks"]["broker"]["ok"]  # it says which dependency is down
        health = urllib.request.urlopen(url.replace("readyz", "healthz"), timeout=10)
        assert health.status == 200  # the process itself is fine

        private_postgres.start()
        wait_for(lambda: get_json(url)[0] == 200, timeout=30, what="ready again")
    finally:
        web.send_signal(signal.SIGTERM)
        web.wait(timeout=20)
        log.close()


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return r.read().decode()


def sample(text: str, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    total = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


def test_worker_metrics_move_when_steps_run_crash_and_recover(cluster, tmp_path):
    metrics_dir = tmp_path / "metrics"
    metrics_dir.mkdir()
    shared = {"PROMETHEUS_MULTIPROC_DIR": str(metrics_dir)}  # one host's workers
    port = free_port()
    cluster.worker(RUNS_WORKER_METRICS_PORT=str(port), **shared)

    run = engine.submit_run(workflow="charge-payment", input={"amount": 4})
    assert wait_settled(run, cluster).status == RunStatus.SUCCEEDED
    text = scrape(port)
    labels = {"workflow": "charge-payment", "kind": "idempotent"}
    assert sample(text, "durable_runs_steps_total", outcome="started", **labels) == 1
    assert sample(text, "durable_runs_steps_total", outcome="succeeded", **labels) == 1
    assert sample(text, "durable_runs_step_duration_seconds_count", **labels) == 1
    assert sample(text, "durable_runs_step_queue_wait_seconds_count", **labels) == 1

    # The worker stops; the next one is killed after the effect (as an OOM kill would);
    # a third, with the beat's sweeps, recovers the attempt and finishes the run.
    first = cluster.processes[-1]
    first.terminate()
    first.wait_exit()
    doomed = cluster.worker(faults="after_effect:charge", **shared)
    crashed_run = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    assert doomed.wait_exit() == -signal.SIGKILL
    port = free_port()
    cluster.worker(RUNS_WORKER_METRICS_PORT=str(port), **shared)
    cluster.beat()
    assert wait_settled(crashed_run, cluster).status == RunStatus.SUCCEEDED
    text = scrape(port)
    assert sample(text, "durable_runs_steps_total", outcome="crashed", **labels) == 1
    assert sample(text, "durable_runs_attempts_recovered_total", **labels) == 1
    # Counts of stopped and killed processes survive them (multiprocess files).
    assert sample(text, "durable_runs_steps_total", outcome="started", **labels) == 3
    assert sample(text, "durable_runs_steps_total", outcome="succeeded", **labels) == 2


def test_a_step_log_line_carries_its_run_and_step(cluster):
    worker = cluster.worker(LOG_FORMAT="json")
    run = engine.submit_run(workflow="charge-payment", input={"amount": 6})
    assert wait_settled(run, cluster).status == RunStatus.SUCCEEDED
    lines = [json.loads(x) for x in worker.output().splitlines() if x.startswith("{")]
    done = [x for x in lines if x.get("message") == "step charge attempt 1 succeeded"]
    assert len(done) == 1, worker.output()[-3000:]
    assert done[0]["run_id"] == str(run.id) and done[0]["step"] == "charge"
    assert done[0]["attempt"] == 1 and done[0]["worker"].endswith(f":{worker.popen.pid}")
    assert Run.objects.get(pk=run.id).status == RunStatus.SUCCEEDED
