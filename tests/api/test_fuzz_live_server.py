"""The API fuzzed from its own OpenAPI schema by the Schemathesis CLI (`st run`, the
installed package, as a subprocess), over real HTTP, against a real server process
(gunicorn, as in production: docker/Dockerfile) serving the app on the test database.

As an operator and as a submitter, every check (`--checks all`: no 5xx; every status,
content type, header and body as documented; schema-valid requests accepted and
schema-violating ones refused; missing authentication refused; links and resources that
exist) and every phase: examples, coverage, fuzzing, and the stateful phase, which
follows the schema's links (POST /api/runs/ to the run's operations, GET /api/claims/
to resolve, take and release) with ids that exist. No failure may be reported.

Deterministic as far as a live server allows: a fixed seed, no example database, a
bounded number of examples per operation; ids the server makes (run UUIDs) differ per
run, so the exact requests of the stateful phase may too.

Bounds, for CI (about a minute on two cores): MAX_EXAMPLES examples per operation in
the fuzzing phase, STATEFUL_CONFIG for the stateful one; the coverage phase sends each
schema boundary once regardless.

Two deliberate choices:
- The server registers the shipped workflows only (examples.workflows). Their inputs
  are plain JSON types whose declared schema is exactly what the server checks; a
  pydantic-declared input (tests.support.workflows' typed-order) is validated in pydantic's lax
  mode, which accepts "5" for an integer the schema says must be a number.
- U+0000 is generated only in a third run, which leaves out the operations that carry a
  free-form JSON value (FREE_JSON): PostgreSQL cannot store it, the API refuses it in
  every string (400, the API's description says so), and every text field's schema
  says so (a pattern: tests/api/test_text_fields.py holds each, server and schema); but
  JSON Schema cannot say it of the arbitrary JSON values a run's input, a result or a
  payload is, where the generator would put it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from runs import engine
from runs.principals import Principal
from runs.tools.processes import ChildProcess, stop_all
from tests.conftest import make_user
from tests.integration.servers import free_port
from tests.support import factories
from tests.support.api import api_token
from tests.support.places import database_url_for_tests
from tests.support.waiting import wait_for

pytestmark = pytest.mark.live

SEED = 20261201
MAX_EXAMPLES = 30
# The stateful phase's own bounds (its generation settings are its own, so the one about
# U+0000 is said again): longer walks and more of them follow more of the schema's links
# (about 25 of 46, against about 11 with the defaults) for some 10 s more.
STATEFUL_CONFIG = """
[phases.stateful]
max-steps = 20

[phases.stateful.generation]
max-examples = 300
allow-x00 = {allow_x00}
database = "none"
"""
# The operations a free-form JSON value travels in (a run's input, a signal's payload, a
# decision's result and evidence): left out of the run that generates U+0000 (above).
FREE_JSON = ("runs_create", "runs_signal", "claims_resolve")
OPERATIONS = 22
TIMEOUT_SECONDS = 240
UNRESOLVED_CLAIMS = 6  # the stateful phase resolves some; some stay for take and release


def schemathesis_cli() -> str:
    """The `st` entry point of the Schemathesis installed beside this Python."""
    beside = Path(sys.executable).parent / "st"
    found = str(beside) if beside.exists() else shutil.which("st")
    assert found, "the Schemathesis CLI (st) is not installed: `make install`"
    return found


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False


@pytest.fixture
def live_api(transactional_db, tmp_path) -> Iterator[str]:
    """gunicorn serving the app on the test database; its base URL."""
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": database_url_for_tests(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "RUNS_QUEUE": settings.CELERY_TASK_DEFAULT_QUEUE,
        "RUNS_WORKFLOW_MODULES": "examples.workflows",
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        # Hundreds of requests a minute, by the operator and, to check that they are
        # refused, without credentials.
        "API_THROTTLE_USER": "1000000/min",
        "API_THROTTLE_ANON": "1000000/min",
        "PYTHONUNBUFFERED": "1",
    }
    args = [
        sys.executable, "-m", "gunicorn", "-c", "python:config.gunicorn", "config.wsgi:application",
        "--bind", f"127.0.0.1:{port}", "--workers", "1", "--threads", "4",
    ]  # fmt: skip
    web = ChildProcess("gunicorn", args, env, tmp_path / "gunicorn.log")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(
            lambda: answers(f"{base}/healthz"), timeout=60, what="gunicorn", on_timeout=web.tail
        )
        yield base
    finally:
        stop_all([web])
        # Submissions queued their first steps; no worker takes them.
        from config.celery import app

        app.control.purge()


@pytest.mark.parametrize(
    ("role", "x00"),
    [("operators", False), ("submitters", False), ("operators", True)],
    ids=["operator", "submitter", "operator-with-nul"],
)
def test_schemathesis_finds_no_disagreement_between_the_schema_and_the_server(
    live_api, tmp_path, role, x00
):
    """As an operator (every operation, every link) and as a submitter (a service
    account: its own runs, and 403 for what it may not do, which the schema documents).
    With `x00`, U+0000 is generated too, in every operation without a free-form JSON
    value: every text field's schema says the server refuses it (docs/api.md: `note` and
    `reason` were refused where the schema allowed it)."""
    user = make_user("fuzz", role)
    token = api_token(user)
    # Something for the links to lead to: runs (the submitter's own, so it reads them),
    # and unresolved claims to decide.
    by = Principal.of_user(user, "api-token")
    engine.submit_run(workflow="merge-change", input={"change_id": 1}, by=by)
    engine.submit_run(workflow="agent-refund", input={"ticket": 1, "amount": 5}, by=by)
    for change_id in range(2, 2 + UNRESOLVED_CLAIMS):
        factories.crashed_merge(change_id=change_id)
    config = tmp_path / "schemathesis.toml"
    config.write_text(STATEFUL_CONFIG.format(allow_x00=str(x00).lower()))
    excluded = [arg for op in FREE_JSON for arg in ("--exclude-operation-id", op)] if x00 else []
    # U+0000 is a matter of each text field: the coverage and fuzzing phases reach every
    # one; the walks of the stateful phase (a minute more in CI) add nothing to it.
    phases = ("Coverage", "Fuzzing") if x00 else ("Examples", "Coverage", "Fuzzing", "Stateful")
    command = [
        schemathesis_cli(), "--config-file", str(config),
        "run", f"{live_api}/api/schema/",
        "--header", f"Authorization: Token {token}",
        "--checks", "all",
        "--phases", ",".join(phases).lower(),
        "--seed", str(SEED),
        "--max-examples", str(MAX_EXAMPLES),
        "--generation-database", "none",
        "--generation-allow-x00", str(x00).lower(), *excluded,
        "--workers", "1",
        "--request-timeout", "30",
        "--no-color",
        "--report", "junit", "--report-dir", str(tmp_path / "report"),
    ]  # fmt: skip
    started = time.monotonic()

    done = subprocess.run(
        command,
        cwd=tmp_path,  # its own files (reports, caches) go there
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
    )

    elapsed = time.monotonic() - started
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"st run exited {done.returncode} after {elapsed:.0f}s\n{output}"
    summary = output[output.rfind("SUMMARY") :]
    tested = OPERATIONS - len(excluded) // 2
    assert f"Selected: {tested}/{OPERATIONS}" in summary and f"Tested: {tested}" in summary, summary
    for phase in phases:
        assert f"✅ {phase}" in summary, summary
    assert "failure" not in summary, summary
    if x00:
        return  # no stateful phase: no links walked
    # The stateful phase walked the schema's links (not only ones it inferred itself).
    covered = re.search(
        r"API Links:\s+(\d+) covered / (\d+) selected / \d+ total \((\d+) inferred", output
    )
    assert covered, output
    links, selected, inferred = map(int, covered.groups())
    assert selected - inferred >= 30, covered.group(0)
    # A submitter's walks end at its first 403 (claims, batches, pauses): fewer links.
    assert links >= (10 if role == "operators" else 3), covered.group(0)
