"""The REST API through DRF's test client, authenticated with tokens as scripts are:
submission dedup, reading runs and claims, deciding claims, and the one error shape of
every refusal (which writes nothing)."""

from __future__ import annotations

import io
import json
import threading
from collections import Counter

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models.functions import Now
from rest_framework.test import APIClient

from reconciliation.models import ClaimTake
from runs import engine
from runs.models import Claim, Event, Run, SubmissionKey
from runs.record import events
from runs.states import ClaimStatus, RunStatus, StepStatus
from tests.conftest import make_user
from tests.support import factories
from tests.support.api import error_of, token_client, written

MERGE = {"workflow": "merge-change", "input": {"change_id": 42}}


@pytest.fixture
def api(operator):
    return token_client(operator)


def submit(client, body=MERGE, key=None, **extra):
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post("/api/runs/", body, format="json", **headers, **extra)


# --- submitting ---------------------------------------------------------------------------
def test_submit_creates_a_run_answering_201_with_its_location(api):
    response = submit(api)

    assert response.status_code == 201
    run = Run.objects.get()
    body = response.json()
    assert response["Location"] == f"http://testserver/api/runs/{run.id}/"
    assert (body["id"], body["workflow"], body["version"], body["status"]) == (
        str(run.id),
        "merge-change",
        1,
        "pending",
    )
    assert body["input"] == {"change_id": 42}
    assert [(s["name"], s["kind"], s["status"]) for s in body["steps"]] == [
        ("merge", "guarded", "queued")
    ]
    assert (body["claims"], body["compacted"]) == ([], False)


def test_submit_same_key_same_body_answers_200_with_the_first_run(api):
    first = submit(api, key="order-42")
    again = submit(api, key="order-42")

    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["id"] == first.json()["id"]
    assert "Location" not in again
    assert Run.objects.count() == 1


def test_submit_same_key_other_body_answers_409_naming_the_run(api):
    first = submit(api, key="order-42").json()
    before = written()

    response = submit(api, {"workflow": "merge-change", "input": {"change_id": 43}}, "order-42")

    error = error_of(response, 409, "idempotency_key_conflict")
    assert error["message"] == (
        f"idempotency key 'order-42' was already used for a different request, which "
        f"created run {first['id']}; use a new key for a new request"
    )
    assert written() == before


@pytest.mark.django_db(transaction=True)
def test_submit_twenty_concurrent_identical_posts_make_one_run(operator):
    clients = [token_client(operator) for _ in range(20)]
    barrier = threading.Barrier(20)
    statuses: list[int] = []
    ids: set[str] = set()
    failures: list[BaseException] = []
    lock = threading.Lock()

    def post(client: APIClient) -> None:
        try:
            barrier.wait(timeout=30)
            response = submit(client, key="order-7")
            with lock:
                statuses.append(response.status_code)
                ids.add(response.json()["id"])
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=post, args=(c,)) for c in clients]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert failures == []
    assert Counter(statuses) == {201: 1, 200: 19}
    assert Run.objects.count() == 1
    assert ids == {str(Run.objects.get().id)}
    assert SubmissionKey.objects.count() == 1


@pytest.mark.parametrize("key", ["", "has space", "x" * 201, "semi;colon", "naïve"])
def test_submit_invalid_key_answers_400_naming_the_header(api, key):
    before = written()

    error = error_of(submit(api, key=key), 400, "invalid_idempotency_key")

    assert list(error["fields"]) == ["Idempotency-Key"]
    assert "use 1 to 200 characters among letters, digits" in error["message"]
    assert written() == before


def test_submit_without_key_makes_a_new_run_each_time(api):
    first, second = submit(api), submit(api)

    assert (first.status_code, second.status_code) == (201, 201)
    assert first.json()["id"] != second.json()["id"]
    assert Run.objects.count() == 2
    assert SubmissionKey.objects.count() == 0


def test_submit_explicit_version_and_default_input(api):
    response = submit(api, {"workflow": "versioned", "version": 2})

    assert response.status_code == 201
    assert (response.json()["version"], response.json()["input"]) == (2, {})


# --- refusals: one shape, nothing written ----------------------------------------------
@pytest.mark.parametrize(
    ("body", "code", "fields"),
    [
        (
            {"workflow": "no-such-flow", "input": {}},
            "unknown_workflow",
            {"workflow"},
        ),
        (
            {"workflow": "merge-change", "version": 9, "input": {"change_id": 1}},
            "unknown_version",
            {"version"},
        ),
        (
            {"workflow": "merge-change", "input": {"change_id": "1", "extra": 2}},
            "invalid_input",
            {"input"},
        ),
        ({"workflow": "merge-change", "input": [1]}, "invalid_input", {"input"}),
        ({"input": {}}, "invalid", {"workflow"}),
        ({"workflow": "merge-change", "version": "two"}, "invalid", {"version"}),
        ({"workflow": "merge-change", "verison": 1}, "invalid", {"verison"}),
        ({"workflow": "merge-change", "input": {"s": "a\x00b"}}, "invalid", {"input"}),
        ([1, 2], "invalid", None),
    ],
)
def test_submit_refusals_have_the_error_shape_and_write_nothing(api, body, code, fields):
    before = written()

    error = error_of(submit(api, body, key="k-1"), 400, code)

    assert (set(error["fields"]) if "fields" in error else None) == fields
    assert written() == before


def test_submit_invalid_input_lists_every_problem_by_field(api):
    error = error_of(
        submit(api, {"workflow": "merge-change", "input": {"change_id": "1", "x": 2}}),
        400,
        "invalid_input",
    )
    assert error["fields"] == {
        "input": ["unknown field 'x'", "field 'change_id' must be int, got str"]
    }
    assert error["message"] == (
        "invalid input: unknown field 'x'; field 'change_id' must be int, got str"
    )


def test_submit_an_int_search_field_over_200_digits_answers_400_naming_it_and_writes_nothing(api):
    before = written()

    error = error_of(
        submit(api, {"workflow": "merge-change", "input": {"change_id": 10**200}}),
        400,
        "invalid_input",
    )

    problem = (
        "field 'change_id' is a search field, so its text must be at most 200 characters "
        "(from -(10**199 - 1) to 10**200 - 1); got 201"
    )
    assert error == {
        "code": "invalid_input",
        "message": f"invalid input: {problem}",
        "fields": {"input": [problem]},
    }
    assert written() == before


def test_unknown_version_message_lists_known_versions(api):
    error = error_of(
        submit(api, {"workflow": "merge-change", "version": 3, "input": {"change_id": 1}}),
        400,
        "unknown_version",
    )
    assert error == {
        "code": "unknown_version",
        "message": "workflow 'merge-change' has no version 3; known versions: 1",
        "fields": {"version": ["workflow 'merge-change' has no version 3; known versions: 1"]},
    }


@pytest.mark.parametrize(
    ("raw", "detail"),
    [
        (b'{"workflow": "merge-change",', "JSON parse error"),
        (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
        (b'{"workflow": "merge-change", "input": {"change_id": 1e400}}', "too large"),
        (b'{"workflow": "\\ud800"}', "lone surrogate"),
        (b"\xff\xfe", "JSON parse error"),
    ],
)
def test_malformed_json_answers_400_and_writes_nothing(api, raw, detail):
    before = written()

    response = api.post("/api/runs/", raw, content_type="application/json")

    error = error_of(response, 400, "malformed_json")
    assert detail in error["message"]
    assert written() == before


def test_body_over_the_limit_answers_413_unread(api, settings):
    settings.API_MAX_BODY_BYTES = 100
    before = written()
    body = {"workflow": "merge-change", "input": {"change_id": 1, "pad": "x" * 200}}

    error = error_of(submit(api, body), 413, "request_too_large")

    assert error["message"].endswith("bytes; at most 100 are accepted")
    assert written() == before


def test_body_other_than_json_answers_415(api):
    response = api.post("/api/runs/", {"workflow": "merge-change"}, format="multipart")
    error_of(response, 415, "unsupported_media_type")
    assert Run.objects.count() == 0


def test_wrong_method_answers_405(api):
    error_of(api.delete("/api/runs/"), 405, "method_not_allowed")
    error_of(api.get("/api/claims/1/resolve/"), 405, "method_not_allowed")
    error_of(api.options("/api/runs/"), 405, "method_not_allowed")


def test_unknown_api_path_answers_json_404(api):
    error = error_of(api.get("/api/nothing/here/"), 404, "not_found")
    assert error["message"] == (
        "no API endpoint at /api/nothing/here/ (the endpoints are listed at /api/docs/)"
    )
    hint = error_of(api.post("/api/runs", MERGE, format="json"), 404, "not_found")
    assert "did you mean /api/runs/ ?" in hint["message"]
    error_of(token_client(None).get("/api/"), 404, "not_found")
    assert Run.objects.count() == 0


@pytest.mark.parametrize(
    "path",
    [
        "/api/runs/00000000-0000-0000-0000-000000000000/",
        "/api/runs/00000000-0000-0000-0000-000000000000/steps/",
        "/api/runs/00000000-0000-0000-0000-000000000000/events/",
        "/api/runs/00000000-0000-0000-0000-000000000000/export/",
        "/api/runs/not-a-uuid/",
    ],
)
def test_unknown_run_answers_404(api, path):
    error_of(api.get(path), 404, "not_found")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("status=sleeping", "status"),
        ("created_after=yesterday", "created_after"),
        ("created_before=2024-13-01T00:00:00Z", "created_before"),
        ("ordering=id", "ordering"),
        ("page=0", "page"),
        ("page=two", "page"),
        ("page_size=501", "page_size"),
        ("workflow=a%00b", "workflow"),
    ],
)
def test_runs_list_bad_filter_answers_400_naming_it(api, query, field):
    error = error_of(api.get(f"/api/runs/?{query}"), 400, "invalid")
    assert list(error["fields"]) == [field]
    assert error["message"].startswith(f"invalid request: {field}: ")


def test_too_many_query_parameters_answer_400_in_the_shape(api):
    query = "&".join("p=1" for _ in range(1001))  # 4003 bytes: under the length limit
    error = error_of(api.get(f"/api/runs/?{query}"), 400, "invalid")
    assert "number of GET/POST parameters exceeded" in error["message"]


def test_an_overlong_query_string_answers_400_in_the_shape(api):
    query = "unused=" + "m" * 4090  # 4097 bytes (a parameter the API ignores)
    error = error_of(api.get(f"/api/runs/?{query}"), 400, "invalid")
    assert error["message"] == "the query string is 4097 bytes; at most 4096 are accepted"
    assert api.get(f"/api/runs/?{query[:-1]}").status_code == 200  # 4096 bytes is accepted


def test_runs_list_page_past_the_end_answers_404(api):
    error = error_of(api.get("/api/runs/?page=3"), 404, "not_found")
    assert error["message"] == "no page 3: there are 1 page(s) of 50"


def test_anonymous_answers_401_with_the_token_scheme(db):
    response = token_client(None).get("/api/runs/")
    error_of(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"] == "Token"


def test_wrong_token_answers_401(db):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token 0000")
    error = error_of(client.get("/api/runs/"), 401, "authentication_failed")
    assert error["message"] == "Invalid token."


def test_throttled_user_answers_429_with_retry_after_and_writes_nothing(api, settings):
    settings.API_THROTTLE_USER = "2/min"
    assert submit(api).status_code == 201
    assert api.get("/api/runs/").status_code == 200
    before = written()

    response = submit(api)

    error = error_of(response, 429, "throttled")
    assert 0 < int(response["Retry-After"]) <= 60
    assert error["message"].startswith("Request was throttled.")
    assert written() == before


def test_throttled_anonymous_address_answers_429_even_with_a_wrong_token(db, settings):
    settings.API_THROTTLE_ANON = "2/min"
    guesser = APIClient(REMOTE_ADDR="203.0.113.9")
    guesser.credentials(HTTP_AUTHORIZATION="Token wrong")
    assert [guesser.get("/api/runs/").status_code for _ in range(2)] == [401, 401]

    error_of(guesser.get("/api/runs/"), 429, "throttled")
    error_of(token_client(None).get("/api/runs/"), 401, "not_authenticated")  # another address


def test_anonymous_throttle_behind_a_proxy_counts_the_client_not_the_proxy(db, settings):
    """The address login throttling counts (TRUSTED_PROXY_COUNT,
    tests/pages/test_login_roles_headers.py)."""
    settings.API_THROTTLE_ANON = "2/min"
    settings.TRUSTED_PROXY_COUNT = 1

    def via_proxy(address: str, spoofed: str = "") -> APIClient:
        forwarded = f"{spoofed}, {address}" if spoofed else address
        return APIClient(REMOTE_ADDR="10.0.0.2", HTTP_X_FORWARDED_FOR=forwarded)

    guesser = via_proxy("203.0.113.9")
    assert [guesser.get("/api/runs/").status_code for _ in range(2)] == [401, 401]
    error_of(via_proxy("203.0.113.9", spoofed="192.0.2.1").get("/api/runs/"), 429, "throttled")
    error_of(via_proxy("198.51.100.7").get("/api/runs/"), 401, "not_authenticated")


def test_throttle_counts_are_per_user(operator, viewer, settings):
    settings.API_THROTTLE_USER = "1/min"
    alice, bob = token_client(operator), token_client(viewer)
    assert alice.get("/api/runs/").status_code == 200
    error_of(alice.get("/api/runs/"), 429, "throttled")
    assert bob.get("/api/runs/").status_code == 200


# --- sessions ------------------------------------------------------------------------------
def test_session_posts_need_the_csrf_token(operator):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(operator)
    assert client.get("/api/runs/").status_code == 200

    error = error_of(submit(client), 403, "permission_denied")

    assert error["message"].startswith("CSRF Failed")
    assert Run.objects.count() == 0
    client.get("/")  # a page sets the CSRF cookie, which the docs page sends back
    token = client.cookies["csrftoken"].value
    assert submit(client, HTTP_X_CSRFTOKEN=token).status_code == 201


# --- reading runs ------------------------------------------------------------------------
def test_runs_list_filters_orders_and_paginates(api):
    merge = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    charge = engine.submit_run(workflow="charge-payment", input={"amount": 5})
    engine.cancel_run(run_id=charge.id, actor="ann", reason="test")
    third = engine.submit_run(workflow="merge-change", input={"change_id": 2})
    charge.refresh_from_db()

    def ids(query: str) -> list[str]:
        body = api.get(f"/api/runs/?{query}").json()
        return [r["id"] for r in body["results"]]

    assert ids("") == [str(third.id), str(charge.id), str(merge.id)]
    assert ids("ordering=created_at") == [str(merge.id), str(charge.id), str(third.id)]
    assert ids("workflow=merge-change") == [str(third.id), str(merge.id)]
    assert ids("status=cancelled") == [str(charge.id)]
    assert ids("workflow=") == [str(third.id), str(charge.id), str(merge.id)]
    after = charge.created_at.isoformat()
    assert ids(f"created_after={after.replace('+00:00', 'Z')}") == [str(third.id), str(charge.id)]
    assert ids(f"created_before={after.replace('+00:00', '%2B00:00')}") == [str(merge.id)]
    page = api.get("/api/runs/?page_size=2&page=2").json()
    assert (page["count"], [r["id"] for r in page["results"]]) == (3, [str(merge.id)])
    assert page["next"] is None
    assert page["previous"] == "http://testserver/api/runs/?page_size=2"
    cancelled = api.get("/api/runs/?status=cancelled").json()["results"][0]
    assert (cancelled["status"], cancelled["error"]) == ("cancelled", "cancelled by ann: test")


def test_run_detail_has_steps_claims_and_compacted(api):
    claim = factories.crashed_merge(change_id=3)

    body = api.get(f"/api/runs/{claim.run_id}/").json()

    assert body["status"] == RunStatus.NEEDS_RECONCILIATION
    assert body["steps"] == [
        {
            "name": "merge",
            "key": "merge",
            "kind": "guarded",
            "status": "unresolved",
            "attempts": 1,
            "error": "worker died during a guarded effect",
        }
    ]
    assert body["claims"] == [
        {
            "id": claim.id,
            "key": claim.key,
            "status": "unresolved",
            "step": "merge",
            "kind": "guarded",
            "item_key": None,
        }
    ]
    assert body["compacted"] is False


def test_run_steps_include_batches_and_attempts(api):
    run = engine.submit_run(workflow="migrate-records", input={"count": 3, "batch_size": 2})
    factories.run_queued(run)

    body = api.get(f"/api/runs/{run.id}/steps/").json()

    assert body["count"] == 4
    steps = {s["key"]: s for s in body["results"]}
    assert list(steps) == ["list_records", "migrate", "migrate[0]", "migrate[1]"]
    assert (steps["migrate[1]"]["parent"], steps["migrate[1]"]["batch_index"]) == ("migrate", 1)
    assert steps["list_records"]["result"] == [1, 2, 3]
    assert [(a["number"], a["status"]) for a in steps["migrate[0]"]["attempts"]] == [
        (1, "succeeded")
    ]
    assert steps["migrate"]["attempts"] == []  # a map step runs through its batches
    assert all(s["status"] == StepStatus.SUCCEEDED for s in steps.values())


def test_run_detail_and_show_run_name_a_maps_open_item_claims_and_count_the_rest(api):
    """A map's item claims are its registry: the done ones are counted under the map
    step, and one still open (unresolved, in flight) is listed with its item, so the
    answer never silently leaves out a claim someone may have to decide. (No example
    maps a guarded effect, so the open one is made by hand.)"""
    run = engine.submit_run(workflow="migrate-records", input={"count": 3, "batch_size": 2})
    factories.run_queued(run)
    open_claim = Claim.objects.filter(run=run, item_key__isnull=False).order_by("id").last()
    Claim.objects.filter(pk=open_claim.pk).update(
        status=ClaimStatus.UNRESOLVED, unresolved_at=Now()
    )

    body = api.get(f"/api/runs/{run.id}/").json()
    assert body["claims"] == [
        {
            "id": open_claim.id,
            "key": open_claim.key,
            "status": "unresolved",
            "step": "migrate",
            "kind": open_claim.kind,
            "item_key": open_claim.item_key,
        }
    ]
    [migrate] = [s for s in body["steps"] if s["key"] == "migrate"]
    assert migrate["items"] == {"succeeded": 2, "unresolved": 1}

    out = io.StringIO()
    call_command("show_run", str(run.id), "--json", stdout=out)
    shown = json.loads(out.getvalue())
    assert [(c["key"], c["item_key"]) for c in shown["claims"]] == [
        (open_claim.key, open_claim.item_key)
    ]
    out = io.StringIO()
    call_command("show_run", str(run.id), stdout=out)
    assert f"(item {open_claim.item_key})" in out.getvalue()
    assert "item claims that are done are counted under their step" in out.getvalue()
    # As it was: the history check after every test reads the registry from the claims.
    Claim.objects.filter(pk=open_claim.pk).update(status=ClaimStatus.SUCCEEDED, unresolved_at=None)


def test_run_events_tail_by_seq(api):
    run = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    url = f"/api/runs/{run.id}/events/"

    first = api.get(url).json()
    assert [e["type"] for e in first["results"]] == [events.RUN_SUBMITTED, events.STEP_QUEUED]
    assert (first["next"], first["next_after_seq"]) == (None, 2)
    assert first["results"][1]["step"] == "merge"

    nothing = api.get(f"{url}?after_seq=2").json()
    assert (nothing["results"], nothing["next_after_seq"]) == ([], 2)

    factories.run_queued(run)
    page = api.get(f"{url}?after_seq=2&limit=2").json()
    assert [e["seq"] for e in page["results"]] == [3, 4]
    assert page["next"] == f"http://testserver{url}?after_seq=4&limit=2"
    seen = [e["seq"] for e in page["results"]]
    while page["next"]:
        page = api.get(page["next"]).json()
        seen += [e["seq"] for e in page["results"]]
    assert seen == list(range(3, Event.objects.filter(run=run).count() + 1))
    assert page["results"][-1]["type"] == events.RUN_SUCCEEDED
    assert page["next_after_seq"] == seen[-1]


def test_run_events_bad_cursor_answers_400(api):
    run = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    error = error_of(api.get(f"/api/runs/{run.id}/events/?after_seq=-1"), 400, "invalid")
    assert list(error["fields"]) == ["after_seq"]
    error = error_of(api.get(f"/api/runs/{run.id}/events/?limit=1001"), 400, "invalid")
    assert list(error["fields"]) == ["limit"]


def test_workflows_list_versions_steps_and_input_schema(api):
    body = api.get("/api/workflows/?page_size=500").json()

    by_name = {w["name"]: w for w in body["results"]}
    assert by_name["merge-change"] == {
        "name": "merge-change",
        "latest_version": 1,
        "versions": [
            {
                "version": 1,
                "description": "Merge a change on a code host that has no idempotency.",
                "steps": [{"name": "merge", "kind": "guarded", "after": [], "map": False}],
                "input_schema": {
                    "$schema": "https://json-schema.org/draft/2020-12/schema",
                    "title": "merge-change v1 input",
                    "description": "Merge a change on a code host that has no idempotency.",
                    "type": "object",
                    "properties": {
                        "change_id": {
                            "type": "integer",
                            "minimum": 1,
                            # its own maximum (examples.fakes.MAX_ID), tighter than a
                            # search field's (its text fits the search key)
                            "maximum": 2_147_483_647,
                            "description": "a search field: at most 200 digits (199 when negative)",
                        }
                    },
                    "required": ["change_id"],
                    "additionalProperties": False,
                },
                "search": ["change_id"],
                "deadline_seconds": None,
            }
        ],
    }
    steps = by_name["migrate-records"]["versions"][0]["steps"]
    assert steps[1] == {
        "name": "migrate",
        "kind": "transactional",
        "after": ["list_records"],
        "map": True,
    }
    assert body["count"] == len(by_name)


# --- cancelling --------------------------------------------------------------------------
def test_cancel_ends_the_run_cancelled_with_who_and_why(api):
    run = engine.submit_run(workflow="merge-change", input={"change_id": 1})

    response = api.post(f"/api/runs/{run.id}/cancel/", {"reason": "wrong change"}, format="json")

    assert response.status_code == 200
    assert (response.json()["status"], response.json()["error"]) == (
        "cancelled",
        "cancelled by olivia: wrong change",
    )
    event = Event.objects.get(run=run, type=events.RUN_CANCELLED)
    assert (event.payload["actor"], event.payload["reason"]) == ("olivia", "wrong change")


def test_cancel_a_finished_run_answers_409_and_writes_nothing(api):
    run = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    assert api.post(f"/api/runs/{run.id}/cancel/").status_code == 200
    before = written()

    error = error_of(api.post(f"/api/runs/{run.id}/cancel/"), 409, "run_not_active")

    assert error["message"] == f"run {run.id} is already cancelled; it cannot be cancelled"
    assert written() == before


def test_cancel_unknown_run_answers_404(api):
    response = api.post("/api/runs/00000000-0000-0000-0000-000000000000/cancel/")
    error_of(response, 404, "not_found")


# --- retrying a failed step ---------------------------------------------------------------
def test_retry_step_reopens_a_failed_run(api):
    run = engine.submit_run(workflow="fork-fail", input={})
    factories.run_queued(run)
    assert Run.objects.get(pk=run.id).status == "failed"

    response = api.post(f"/api/runs/{run.id}/steps/doomed_branch/retry/")

    assert response.status_code == 200
    assert response.json()["status"] == "running"
    event = Event.objects.get(run=run, type=events.RUN_REOPENED)
    # max_attempts: each step's, before the retry (what its earlier attempts were "of")
    assert event.payload == {
        "actor": "olivia",
        "steps": ["doomed_branch"],
        "status": "running",
        "max_attempts": {"doomed_branch": 1},
    }


def test_retry_step_refusals_answer_409_and_write_nothing(api):
    run = engine.submit_run(workflow="fork-fail", input={})
    factories.run_queued(run)
    active = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    before = written()
    error = error_of(api.post(f"/api/runs/{run.id}/steps/steady/retry/"), 409, "refused")
    assert "has no failed step steady" in error["message"]
    error = error_of(api.post(f"/api/runs/{active.id}/steps/merge/retry/"), 409, "run_not_active")
    assert "only a failed run's steps are retried" in error["message"]
    assert written() == before


# --- claims ------------------------------------------------------------------------------
def test_claims_list_unresolved_is_the_queue_oldest_first(api):
    first, second = factories.crashed("merge-change", count=2)
    resolved = factories.crashed_merge(change_id=9)
    api.post(
        f"/api/claims/{resolved.pk}/resolve/", {"outcome": "failed", "note": "no"}, format="json"
    )

    body = api.get("/api/claims/?status=unresolved").json()

    assert [c["id"] for c in body["results"]] == [first.pk, second.pk]
    row = body["results"][0]
    assert (row["key"], row["status"], row["cause"], row["workflow"]) == (
        first.key,
        "unresolved",
        "worker_died",
        "merge-change",
    )
    assert (row["take"], row["resolved_by"], row["resolved_at"]) == (None, "", None)
    assert row["age_seconds"] >= 0
    assert api.get("/api/claims/?status=unresolved&workflow=charge-payment").json()["count"] == 0
    everything = api.get("/api/claims/").json()["results"]
    assert everything[0]["id"] != resolved.pk or everything[0]["resolved_by"] == "olivia"
    error = error_of(api.get("/api/claims/?status=lost"), 400, "invalid")
    assert list(error["fields"]) == ["status"]


def test_resolve_succeeded_finishes_the_run(api):
    claim = factories.crashed_merge()

    response = api.post(
        f"/api/claims/{claim.pk}/resolve/",
        {
            "outcome": "succeeded",
            "note": "merged on the host",
            "result": {"merge_id": 77},
            "reference": "https://host/m/77",
        },
        format="json",
    )

    assert response.status_code == 200
    body = response.json()
    assert (body["step_status"], body["run_status"], body["replayed"]) == (
        "succeeded",
        "succeeded",
        False,
    )
    assert (body["claim"]["resolved_by"], body["claim"]["result"]) == ("olivia", {"merge_id": 77})
    assert body["claim"]["evidence"] == {"resolution": {"reference": "https://host/m/77"}}
    claim.refresh_from_db()
    assert (claim.status, claim.resolution_note) == (ClaimStatus.SUCCEEDED, "merged on the host")


def test_resolve_same_decision_again_is_replayed(api):
    claim = factories.crashed_merge()
    decision = {"outcome": "failed", "note": "no merge on the host"}
    assert api.post(f"/api/claims/{claim.pk}/resolve/", decision, format="json").status_code == 200
    before = written()

    again = api.post(f"/api/claims/{claim.pk}/resolve/", decision, format="json")

    assert (again.status_code, again.json()["replayed"]) == (200, True)
    assert written() == before


def test_resolve_a_resolved_claim_answers_409_naming_who(api, viewer):
    claim = factories.crashed_merge()
    engine_resolution = api.post(
        f"/api/claims/{claim.pk}/resolve/", {"outcome": "failed", "note": "none"}, format="json"
    )
    assert engine_resolution.status_code == 200
    claim.refresh_from_db()
    before = (written(), Claim.objects.filter(pk=claim.pk).values().get())

    response = api.post(
        f"/api/claims/{claim.pk}/resolve/",
        {"outcome": "succeeded", "note": "merged"},
        format="json",
    )

    error = error_of(response, 409, "claim_already_resolved")
    when = claim.resolved_at.isoformat(timespec="seconds")
    assert (
        error["message"] == f"claim {claim.key} was already resolved as failed by olivia at {when}"
    )
    assert (written(), Claim.objects.filter(pk=claim.pk).values().get()) == before


@pytest.mark.parametrize(
    ("decision", "fields"),
    [
        (
            {"outcome": "succeeded", "note": "  "},
            {"note": ["a resolution needs a note saying why"]},
        ),
        (
            {"outcome": "failed", "note": "no", "result": {"x": 1}},
            {"result": ["a failed outcome has no result (the effect did not happen)"]},
        ),
        ({"outcome": "maybe", "note": "x"}, {"outcome": ['"maybe" is not a valid choice.']}),
        ({"outcome": "failed"}, {"note": ["This field is required."]}),
        (
            {"outcome": "succeeded", "note": "x", "reference": "h" * 2001},
            {
                "reference": [
                    "reference is 2001 characters long; at most 2000 (link to long "
                    "evidence instead of pasting it)"
                ]
            },
        ),
        (
            {"outcome": "succeeded", "note": "x", "result": {"k": "\x00"}},
            {"result": ["strings cannot contain U+0000 (NUL)"]},
        ),
    ],
)
def test_resolve_bad_decision_answers_400_with_fields_and_writes_nothing(api, decision, fields):
    claim = factories.crashed_merge()
    before = written()

    response = api.post(f"/api/claims/{claim.pk}/resolve/", decision, format="json")

    assert error_of(response, 400, "invalid")["fields"] == fields
    assert written() == before
    claim.refresh_from_db()
    assert claim.status == ClaimStatus.UNRESOLVED


@pytest.mark.parametrize("action", ["resolve", "take", "release"])
def test_claim_actions_on_an_unknown_claim_answer_404(api, action):
    body = {"outcome": "failed", "note": "x"} if action == "resolve" else {}
    error = error_of(
        api.post(f"/api/claims/999999/{action}/", body, format="json"), 404, "not_found"
    )
    assert error["message"] == "no claim with id 999999"
    error_of(api.post(f"/api/claims/{'9' * 19}/{action}/", body, format="json"), 404, "not_found")


def test_take_and_release_a_claim(api, operator):
    claim = factories.crashed_merge()

    taken = api.post(f"/api/claims/{claim.pk}/take/")
    assert taken.status_code == 200
    assert (taken.json()["claim_id"], taken.json()["taken_by"]) == (claim.pk, "olivia")
    row = api.get("/api/claims/?status=unresolved").json()["results"][0]
    assert row["take"]["taken_by"] == "olivia"

    released = api.post(f"/api/claims/{claim.pk}/release/")
    assert released.json() == {"claim_id": claim.pk, "released": True}
    assert api.post(f"/api/claims/{claim.pk}/release/").json()["released"] is False
    assert not ClaimTake.objects.exists()


def test_take_of_a_claim_another_operator_holds_answers_409(api):
    claim = factories.crashed_merge()
    other = token_client(make_user("otto", "operators"))
    assert other.post(f"/api/claims/{claim.pk}/take/").status_code == 200

    error = error_of(api.post(f"/api/claims/{claim.pk}/take/"), 409, "claim_taken")
    assert error["message"].startswith(f"claim {claim.key} is taken by otto since ")
    error_of(api.post(f"/api/claims/{claim.pk}/release/"), 409, "claim_taken")
    assert ClaimTake.objects.get().taken_by.username == "otto"


def test_take_of_a_resolved_claim_answers_409(api):
    claim = factories.crashed_merge()
    api.post(f"/api/claims/{claim.pk}/resolve/", {"outcome": "failed", "note": "n"}, format="json")
    error = error_of(api.post(f"/api/claims/{claim.pk}/take/"), 409, "claim_not_unresolved")
    assert "only unresolved claims can be taken" in error["message"]


def test_an_overlong_query_string_is_refused_in_the_error_shape(db, operator):
    from api.middleware import MAX_QUERY_BYTES

    api = token_client(operator)
    error = error_of(api.get("/api/runs/", {"workflow": "x" * MAX_QUERY_BYTES}), 400, "invalid")
    assert "query string" in error["message"]
    assert api.get("/api/runs/", {"workflow": "x" * 100}).status_code == 200
