"""A deployment that registers no workflow (RUNS_WORKFLOW_MODULES unset: the examples are
for development, the tests and the benches only) starts, serves every page and the API,
and says where a list of workflows is expected that there is none, and why."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runs.workflows import registry
from tests.support.api import token_client
from tests.support.declared import withheld

ROOT = Path(__file__).resolve().parents[2]
NONE = (
    '<p class="empty" role="status">No workflow is registered on this server: '
    "<code>RUNS_WORKFLOW_MODULES</code> names the modules that declare them "
    "(docs/operating.md, “Settings”; the examples: <code>examples.workflows</code>).</p>"
)


@pytest.fixture
def no_workflows():
    with withheld(*registry.all_workflows()):
        yield


def test_a_deployment_without_runs_workflow_modules_registers_no_workflow(tmp_path):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "DJANGO_SETTINGS_MODULE": "config.settings",
        "DURABLE_RUNS_VAR": str(tmp_path),  # no services.env of a running stack
        "SECRET_KEY": "k" * 50,
    }
    code = (
        "import django; django.setup(); from django.conf import settings; "
        "from runs.workflows import registry; "
        "print(settings.RUNS_WORKFLOW_MODULES, [w.name for w in registry.all_workflows()])"
    )

    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    named = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env, "RUNS_WORKFLOW_MODULES": "examples.workflows"},
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert (result.returncode, result.stdout) == (0, "[] []\n"), result.stderr
    assert named.stdout == (
        "['examples.workflows'] ['agent-refund', 'charge-payment', 'merge-change', "
        "'merge-change-audited', 'merge-change-checked', 'merge-change-probed', "
        "'merge-change-slow-host', 'migrate-records']\n"
    ), named.stderr


@pytest.mark.parametrize(
    "url", ["/", "/runs/", "/reconciliation/", "/reconciliation/history/", "/workers/", "/pauses/"]
)
def test_every_page_answers_with_no_workflow_registered(no_workflows, operator_client, url):
    assert operator_client.get(url).status_code == 200


def test_the_submit_page_says_no_workflow_is_registered_and_how_to_register_one(
    no_workflows, operator_client
):
    response = operator_client.get("/runs/new/")

    assert response.status_code == 200
    html = response.content.decode()
    assert NONE in html
    assert 'class="submit-run"' not in html


def test_the_pauses_page_says_there_is_nothing_to_pause(no_workflows, operator_client):
    html = operator_client.get("/pauses/").content.decode()

    assert NONE in html
    assert 'class="pause-form"' not in html


def test_the_runs_list_does_not_suggest_a_workflow_that_is_not_there(no_workflows, operator_client):
    html = operator_client.get("/runs/").content.decode()

    sentence = NONE.removeprefix('<p class="empty" role="status">').removesuffix("</p>")
    flat = " ".join(html.split())  # the template breaks the cell's text over lines
    assert f'<td colspan="6" class="empty"> No runs yet. {sentence} </td>' in flat
    assert "migrate-records" not in html


def test_the_api_lists_no_workflow_and_refuses_a_submission_naming_none(no_workflows, operator):
    api = token_client(operator)

    assert api.get("/api/workflows/").json()["results"] == []
    response = api.post("/api/runs/", {"workflow": "merge-change", "input": {}}, format="json")
    assert response.status_code == 400
    assert response.json()["error"]["message"] == (
        "unknown workflow 'merge-change'; no workflow is registered on this server "
        "(RUNS_WORKFLOW_MODULES)"
    )
    assert api.get("/api/schema/").status_code == 200
