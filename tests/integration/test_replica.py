"""Reading pages from a real streaming replica (runs/sql/routing.py, runs/pages/replica.py).

Two private PostgreSQL servers: a primary, and a hot standby made from it by
pg_basebackup and fed by streaming replication. A real web server (runserver) has
DATABASE_URL on the primary and DATABASE_REPLICA_URL on the standby. Pausing the
standby's replay makes it stale on purpose: what a reading page shows then tells
which server it read.
"""

from __future__ import annotations

import http.cookiejar
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.places import ROOT
from tests.support.waiting import wait_for

from .servers import (
    PrivatePostgres,
    free_port,
    manage,
    new_private_postgres,
    remove_private_postgres,
)

pytestmark = pytest.mark.servers


class Client:
    """An HTTP client with (or without) a cookie jar: a browser, or a script that sends
    no cookies back."""

    def __init__(self, base: str, *, cookies: bool, token: str = "") -> None:
        self.base, self.token = base, token
        self.jar = http.cookiejar.CookieJar() if cookies else None
        handlers: list[Any] = [urllib.request.HTTPCookieProcessor(self.jar)] if cookies else []
        self.opener = urllib.request.build_opener(*handlers)

    def request(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, form: bool = False
    ) -> tuple[int, dict[str, str], str]:
        headers = {"Authorization": f"Token {self.token}"} if self.token else {}
        data = None
        if body is not None and form:
            data = urllib.parse.urlencode(body).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
            headers["Referer"] = self.base + path
        elif body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        try:
            with self.opener.open(req, timeout=20) as response:
                return response.status, dict(response.headers), response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, dict(exc.headers), exc.read().decode()
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            return 0, {}, ""  # not answering (yet)

    def cookie(self, name: str) -> str | None:
        assert self.jar is not None
        return next((c.value for c in self.jar if c.name == name), None)


def make_standby(primary: PrivatePostgres) -> PrivatePostgres:
    base = pathlib.Path(tempfile.mkdtemp(prefix="durable-runs-standby-"))
    standby = PrivatePostgres(base=base, port=free_port(), run_as=primary.run_as)
    if standby.run_as:
        os.chown(base, standby.run_as["user"], standby.run_as["group"])
    # -R writes primary_conninfo and standby.signal: the copy starts as a hot standby
    # that streams from the primary. --checkpoint=fast: the copy starts after an
    # immediate checkpoint, not a spread one paced over minutes.
    standby._run(
        "pg_basebackup",
        *("-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres"),
        *("-D", str(standby.pgdata), "-R", "-X", "stream", "--no-sync", "--checkpoint=fast"),
        timeout=120,
    )
    (base / "sock").mkdir()
    if standby.run_as:
        os.chown(base / "sock", standby.run_as["user"], standby.run_as["group"])
    standby.start()
    return standby


@pytest.fixture
def primary_and_standby() -> Iterator[tuple[PrivatePostgres, PrivatePostgres]]:
    primary = new_private_postgres(pathlib.Path(tempfile.mkdtemp(prefix="durable-runs-pg-")))
    standby = None
    try:
        standby = make_standby(primary)
        yield primary, standby
    finally:
        if standby is not None:
            remove_private_postgres(standby)
        remove_private_postgres(primary)


def replayed_everything(primary: PrivatePostgres, standby: PrivatePostgres) -> bool:
    now = primary.query("SELECT pg_current_wal_lsn()::text")
    row = standby.query("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (now[0],))
    return bool(row and row[0])


def test_reading_pages_read_the_replica_and_a_writer_reads_its_own_writes(
    primary_and_standby, tmp_path
):
    primary, standby = primary_and_standby
    env = {
        **os.environ,
        "DATABASE_URL": primary.url,
        "DATABASE_REPLICA_URL": standby.url,
        "RUNS_DB_CONNECT_TIMEOUT_SECONDS": "2",
        "RUNS_WORKFLOW_MODULES": "examples.workflows",
        # No worker takes the submitted runs' messages: a queue of this test's own.
        "RUNS_QUEUE": f"replica-test-{os.getpid()}",
        "DEBUG": "0",
        "ALLOWED_HOSTS": "127.0.0.1",
        "OPERATOR_PASSWORD": "a long operator password 1",
        "RUNS_REPLICA_RETRY_SECONDS": "0.5",
        "PYTHONUNBUFFERED": "1",
    }
    env.pop("RUNS_TEST_DATABASE", None)
    manage(env, "migrate", "--noinput", timeout=300)
    token = manage(env, "createoperator", "ada", "--token").strip().split()[-1]
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "web.log").open("wb")
    web = subprocess.Popen(
        [sys.executable, "manage.py", "runserver", f"127.0.0.1:{port}", "--noreload"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    script = Client(base, cookies=False, token=token)  # sends no cookie back
    writer = Client(base, cookies=True, token=token)  # keeps what the server sets
    browser = Client(base, cookies=True)
    try:
        wait_for(lambda: script.request("GET", "/healthz")[0] == 200, what="the web server")

        # Caught up: an API read is served by the replica, which says how far behind.
        status, _, body = script.request(
            "POST", "/api/runs/", {"workflow": "merge-change", "input": {"change_id": 1}}
        )
        assert status == 201, body
        first = json.loads(body)["id"]
        wait_for(lambda: replayed_everything(primary, standby), what="the standby to catch up")
        status, headers, body = script.request("GET", f"/api/runs/{first}/")
        assert status == 200, body
        assert float(headers["X-Replica-Lag"]) < 1.0

        # A browser signs in (a POST: the primary) before the replica goes stale.
        status, _, page = browser.request("GET", "/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page)
        assert status == 200 and csrf, page[:500]
        status, _, page = browser.request(
            "POST",
            "/login/",
            {"username": "ada", "password": env["OPERATOR_PASSWORD"],
             "csrfmiddlewaretoken": csrf.group(1)},
            form=True,
        )  # fmt: skip
        assert status == 200 and "Log out" in page, page[:500]
        wait_for(lambda: replayed_everything(primary, standby), what="the standby to catch up")

        # The standby stops replaying: it receives the primary's WAL and shows nothing new.
        standby.query("SELECT pg_wal_replay_pause()")
        wait_for(
            lambda: standby.query("SELECT pg_get_wal_replay_pause_state()")[0] == "paused",
            what="replay to pause",
        )
        status, headers, body = writer.request(
            "POST", "/api/runs/", {"workflow": "merge-change", "input": {"change_id": 1}}
        )
        assert status == 201, body
        second = json.loads(body)["id"]
        assert writer.cookie("dr_written"), "a write sets the position the replica must reach"

        # Read from the stale replica: the new run is not there yet...
        status, headers, body = script.request("GET", f"/api/runs/{second}/")
        assert status == 404, body
        assert "X-Replica-Lag" in headers
        status, _, body = script.request("GET", "/api/runs/")
        assert second not in body and first in body
        # ...while the client that wrote it reads the primary, and sees its own write.
        status, headers, body = writer.request("GET", f"/api/runs/{second}/")
        assert status == 200 and json.loads(body)["id"] == second, body
        assert "X-Replica-Lag" not in headers
        # The queue (the decide form's page) always reads the primary.
        status, headers, page = browser.request("GET", "/reconciliation/")
        assert status == 200 and "X-Replica-Lag" not in headers

        # A page read from the stale replica says how stale, once it is far enough behind.
        wait_for(
            lambda: float(script.request("GET", "/api/runs/")[1]["X-Replica-Lag"]) >= 0.5,
            what="the lag to grow",
        )
        status, headers, page = browser.request("GET", "/runs/")
        assert status == 200 and float(headers["X-Replica-Lag"]) >= 0.5
        assert re.search(r"As of \d+\.\d s ago: this page was read from a replica", page)
        assert second[:8] not in page and first[:8] in page
        status, headers, page = browser.request("GET", f"/runs/{second}/")
        assert status == 404

        # Replay resumes: everyone sees the run; the note goes once the replica caught up.
        standby.query("SELECT pg_wal_replay_resume()")
        wait_for(lambda: script.request("GET", f"/api/runs/{second}/")[0] == 200, what="replay")
        status, headers, page = browser.request("GET", f"/runs/{second}/")
        assert status == 200 and "X-Replica-Lag" in headers
        wait_for(
            lambda: "read from a replica" not in browser.request("GET", "/runs/")[2],
            what="the note to go",
        )

        # The standby goes away: reading pages read the primary, and still answer.
        standby.stop("immediate")
        status, headers, body = script.request("GET", f"/api/runs/{second}/")
        assert status == 200 and "X-Replica-Lag" not in headers, body
        status, headers, page = browser.request("GET", "/runs/")
        assert status == 200 and second[:8] in page
        assert "replica unavailable, pages read the primary" in (tmp_path / "web.log").read_text()

        # It comes back: after RUNS_REPLICA_RETRY_SECONDS, the pages read it again.
        standby.start()
        wait_for(
            lambda: "X-Replica-Lag" in script.request("GET", f"/api/runs/{second}/")[1],
            what="reads to go back to the replica",
        )
    finally:
        web.send_signal(signal.SIGTERM)
        try:
            web.wait(timeout=10)
        except subprocess.TimeoutExpired:
            web.kill()
        log.close()
