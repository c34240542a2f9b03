"""The docs stay true: the README's commands for the first workflow and docs/api.md's
example session run as written, against the test database, a real worker and a live
server, and print what the docs say they print.

What a test cannot run is left out and said so: `. .venv/bin/activate` and
`eval "$(python scripts/stack.py env)"` (this session's environment already points at
its servers), `make up`'s restart of a killed worker (tests/integration/test_stack.py).
The README's longer run for killing the worker is checked against the workflow's input
bounds rather than run. The API session runs in bash with curl and jq, as a reader would;
only its address (`http://127.0.0.1:8000`) and the claim it decides (`<CLAIM_ID>`) are
replaced."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from examples.models import TargetRecord
from runs.models import Claim, Run
from runs.states import ClaimStatus, RunStatus
from runs.workflows import registry
from tests.support import factories
from tests.support.waiting import wait_for

pytestmark = pytest.mark.workers

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
API_DOC = (ROOT / "docs" / "api.md").read_text()
DOCS_ADDRESS = "http://127.0.0.1:8000"


def sh_blocks(text: str, after: str) -> list[str]:
    """The ```sh blocks of `text` from the line `after` on, up to the next heading."""
    start = text.index(after)
    end = text.find("\n## ", start)
    section = text[start : end if end != -1 else len(text)]
    return re.findall(r"```sh\n(.*?)```", section, re.S)


def manage_commands(block: str) -> list[list[str]]:
    """Each `python manage.py …` line of a block, as its arguments (comments dropped)."""
    return [
        shlex.split(line, comments=True)[1:]
        for line in block.splitlines()
        if line.startswith("python manage.py ")
    ]


def run_manage(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=30
    )


def test_the_readmes_first_workflow_commands_run_and_print_what_it_says(cluster):
    env = cluster.env()
    first, kill = sh_blocks(README, "Or submit a run yourself")
    submit, readable, as_json = manage_commands(first)
    assert submit[:2] == ["manage.py", "submit_run"] and submit[2] == "migrate-records"
    assert (readable, as_json) == (
        ["manage.py", "show_run", "<RUN_ID>"],
        ["manage.py", "show_run", "<RUN_ID>", "--json"],
    )
    data = json.loads(submit[submit.index("--input") + 1])
    cluster.worker()

    submitted = run_manage(submit, env)

    assert submitted.returncode == 0, submitted.stderr
    run_id = submitted.stdout.strip().splitlines()[-1]
    assert Run.objects.filter(pk=run_id, workflow="migrate-records", input=data).exists()
    wait_for(
        lambda: Run.objects.filter(pk=run_id, status=RunStatus.SUCCEEDED).exists(),
        what="the README's run to finish",
        timeout=40,
        on_timeout=cluster.logs,
    )
    shown = run_manage([arg.replace("<RUN_ID>", run_id) for arg in readable], env)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == f"run {run_id}  migrate-records v1  succeeded"
    assert lines[1] == f"input {json.dumps(data)}"
    batches = data["count"] // data["batch_size"]
    assert f"  {batches}/{batches} batches succeeded; items: {data['count']} succeeded" in lines
    shown = run_manage([arg.replace("<RUN_ID>", run_id) for arg in as_json], env)
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)  # one JSON object
    assert (document["id"], document["status"], document["input"]) == (run_id, "succeeded", data)
    assert TargetRecord.objects.filter(run_id=run_id).count() == data["count"]

    # The run to kill the worker in: accepted, and far longer than the first one.
    [longer] = manage_commands(kill)
    assert "pkill -KILL -f 'celery -A config worker'" in kill
    long_data = json.loads(longer[longer.index("--input") + 1])
    workflow = registry.latest(longer[2])
    assert workflow is not None and workflow.validate_input(long_data) == long_data
    assert long_data["count"] >= 40 * data["count"]


def tools() -> dict[str, str]:
    found = {name: shutil.which(name) for name in ("bash", "curl", "jq")}
    missing = [name for name, path in found.items() if path is None]
    if missing:
        message = f"{' and '.join(missing)} not found: `apt-get install {' '.join(missing)}`"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return {name: str(path) for name, path in found.items()}


def test_the_api_docs_example_session_runs_as_written(cluster, live_server):
    tools()
    [session] = sh_blocks(API_DOC, "## An example session")
    assert session.count(DOCS_ADDRESS) == 1 and session.count("<CLAIM_ID>") == 1
    # The queue holds a claim to decide, as the session's last step expects.
    claim = factories.crashed_merge(change_id=301)
    script = session.replace(DOCS_ADDRESS, live_server.url).replace("<CLAIM_ID>", str(claim.id))
    env = {
        **cluster.env(),
        # `python` is this interpreter, as in the README's activated venv.
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.pop("OPERATOR_PASSWORD", None)
    cluster.worker()

    done = subprocess.run(
        ["bash", "-c", f"set -euo pipefail\n{script}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=45,
    )

    assert done.returncode == 0, (done.stdout, done.stderr, cluster.logs())
    out = done.stdout.splitlines()
    run = Run.objects.get(workflow="merge-change", input={"change_id": 42})
    assert run.status == RunStatus.SUCCEEDED
    # The events, tailed until the run's end: "seq type step", in order.
    events = [line for line in out if re.fullmatch(r"\d+ \w+ \S*", line)]
    assert events[0] == "1 run_submitted "  # no step
    assert events[-1].split()[1] == "run_succeeded"
    assert [int(line.split()[0]) for line in events] == list(range(1, len(events) + 1))
    # The queue as jq shows it, then the decision's answer.
    rest = "\n".join(out[out.index(events[-1]) + 1 :])
    listed, _, answer = rest.partition("\n}\n")
    shown = json.loads(listed + "\n}")
    assert (shown["id"], shown["key"], shown["run_id"], shown["cause"]) == (
        claim.id,
        claim.key,
        str(claim.run_id),
        "worker_died",
    )
    assert list(shown) == ["id", "key", "run_id", "cause", "reason"] and shown["reason"]
    assert json.loads(answer)["claim"]["status"] == "succeeded"
    decided = Claim.objects.get(pk=claim.pk)
    assert (decided.status, decided.resolved_by) == (ClaimStatus.SUCCEEDED, "olivia")
