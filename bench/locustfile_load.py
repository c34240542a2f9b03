"""The users of bench/load.py's load run (locust, headless, started by bench/load.py).

Two kinds of user, their numbers fixed (LOAD_SUBMITTERS, LOAD_OPERATORS):

- a submitter: a service client with an API token of its own account, submitting small
  migrate-records runs with `POST /api/runs/` and a new Idempotency-Key each time, and
  now and then (LOAD_REPEAT_SHARE) an earlier key of its own again with the same body,
  which must answer the same run (200);
- an operator: signed in through the login page, reading the reconciliation queue, a
  claim, the runs list (pages, filters, the htmx swap), run pages and the API's runs list.

Every request is recorded (name, status, ms) by a listener and written as JSON to
LOAD_RESULTS when locust quits: bench/load.py computes the figures from it. A 429 is
the API's throttle, deliberate: counted apart, never a failure. Anything else that is
not the expected answer is a failure. LOAD_FIXTURE (JSON, written by bench/load.py)
holds the tokens, the operator's login, run ids and claim ids.
"""

from __future__ import annotations

import json
import os
import random
import re
import time
import uuid
from collections import defaultdict
from typing import Any

from locust import HttpUser, between, events, task

FIXTURE: dict[str, Any] = json.loads(open(os.environ["LOAD_FIXTURE"]).read())
REPEAT_SHARE = float(os.environ.get("LOAD_REPEAT_SHARE", "0.1"))

# name -> [(status, ms, failed, when it ended: epoch s)]; written at quit.
RECORDS: dict[str, list[tuple[int, float, bool, float]]] = defaultdict(list)
SPAWNED: list[float] = []  # when every user had been started
# name -> failure message -> count; written at quit.
ERRORS: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
RUN_LINK = re.compile(r'href="/runs/([0-9a-f-]{36})/"')


@events.request.add_listener
def _record(
    request_type: str,
    name: str,
    response_time: float,
    response: Any = None,
    exception: Any = None,
    **_: Any,
) -> None:
    status = getattr(response, "status_code", 0) or 0
    RECORDS[f"{request_type} {name}"].append(
        (int(status), float(response_time), bool(exception), time.time())
    )
    if exception:
        ERRORS[f"{request_type} {name}"][str(exception)[:200]] += 1


@events.spawning_complete.add_listener
def _spawned(**_: Any) -> None:
    SPAWNED.append(time.time())


@events.quitting.add_listener
def _write(**_: Any) -> None:
    with open(os.environ["LOAD_RESULTS"], "w") as f:
        json.dump({"records": RECORDS, "errors": ERRORS, "spawned": SPAWNED[:1]}, f)


def _next_token() -> str:
    tokens: list[str] = FIXTURE["submitter_tokens"]
    _next_token.n = getattr(_next_token, "n", -1) + 1  # type: ignore[attr-defined]
    return tokens[_next_token.n % len(tokens)]  # type: ignore[attr-defined]


class Submitter(HttpUser):
    fixed_count = int(os.environ.get("LOAD_SUBMITTERS", "50"))
    wait_time = between(1.0, 3.0)

    def on_start(self) -> None:
        self.headers = {"Authorization": f"Token {_next_token()}"}
        self.sent: list[tuple[str, dict[str, Any], str]] = []  # (key, body, run id)

    @task
    def submit(self) -> None:
        repeat = bool(self.sent) and random.random() < REPEAT_SHARE
        if repeat:
            key, body, run_id = random.choice(self.sent)
        else:
            key, run_id = f"load-{uuid.uuid4().hex}", ""
            body = {
                "workflow": "migrate-records",
                "input": {"count": random.randint(10, 40), "batch_size": 10},
            }
        with self.client.post(
            "/api/runs/",
            json=body,
            headers={**self.headers, "Idempotency-Key": key},
            name="/api/runs/ (repeated key)" if repeat else "/api/runs/",
            catch_response=True,
        ) as response:
            if response.status_code == 429:
                response.success()  # the throttle: deliberate, counted apart
                return
            expected = 200 if repeat else 201
            if response.status_code != expected:
                why = response.error if response.status_code == 0 else response.status_code
                response.failure(f"{why!r}, expected {expected}")
                return
            got = response.json().get("id", "")
            if repeat and got != run_id:
                response.failure(f"a repeated key answered run {got}, not {run_id}")
                return
            if not repeat:
                self.sent.append((key, body, got))
            response.success()


class Operator(HttpUser):
    fixed_count = int(os.environ.get("LOAD_OPERATORS", "5"))
    wait_time = between(2.0, 5.0)

    def on_start(self) -> None:
        self.client.get("/login/", name="/login/")
        csrf = self.client.cookies.get("csrftoken", "")
        with self.client.post(
            "/login/",
            data={
                "username": FIXTURE["operator"],
                "password": FIXTURE["password"],
                "csrfmiddlewaretoken": csrf,
            },
            headers={"Referer": f"{self.host}/login/"},
            name="/login/",
            catch_response=True,
        ) as response:
            if "sessionid" not in self.client.cookies:
                response.failure("the login did not sign in")
        self.run_ids: list[str] = list(FIXTURE["run_ids"])
        self.token = {"Authorization": f"Token {FIXTURE['operator_token']}"}

    def _page(self, path: str, name: str, **kwargs: Any) -> Any:
        with self.client.get(path, name=name, catch_response=True, **kwargs) as response:
            if response.status_code != 200:
                response.failure(f"{response.error or response.status_code!r}")
            elif response.url and "/login/" in response.url:
                response.failure("sent to the login page")
            else:
                response.success()
            return response

    @task(4)
    def queue(self) -> None:
        self._page("/reconciliation/", "/reconciliation/")

    @task(1)
    def claim(self) -> None:
        claim = random.choice(FIXTURE["claim_ids"])
        self._page(f"/reconciliation/claims/{claim}/", "/reconciliation/claims/[id]/")

    @task(3)
    def runs_list(self) -> None:
        choice = random.random()
        if choice < 0.4:
            response = self._page("/runs/", "/runs/")
        elif choice < 0.7:
            page = random.randint(2, 20)
            response = self._page(f"/runs/?page={page}", "/runs/?page=N")
        elif choice < 0.85:
            status = random.choice(["running", "succeeded", "needs_reconciliation", "pending"])
            response = self._page(
                f"/runs/?status={status}&workflow=migrate-records", "/runs/?status&workflow"
            )
        else:
            response = self._page(
                f"/runs/?page={random.randint(2, 5)}",
                "/runs/?page=N (htmx swap)",
                headers={"HX-Request": "true", "HX-Target": "runs"},
            )
        found = RUN_LINK.findall(response.text or "")
        if found:
            self.run_ids = (found + self.run_ids)[:200]

    @task(3)
    def run_page(self) -> None:
        self._page(f"/runs/{random.choice(self.run_ids)}/", "/runs/[id]/")

    @task(2)
    def api_list(self) -> None:
        if random.random() < 0.5:
            path, name = "/api/runs/", "/api/runs/"
        else:
            path, name = "/api/runs/?status=running&page_size=20", "/api/runs/?status"
        with self.client.get(path, name=name, headers=self.token, catch_response=True) as r:
            if r.status_code == 429:
                r.success()
            elif r.status_code != 200:
                r.failure(f"{r.error or r.status_code!r}")
            else:
                r.success()
