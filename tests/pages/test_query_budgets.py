"""Pages cost a fixed number of queries, whatever the number of runs (speed
at scale): the runs list with each filter and each kind of search, the overview and
the reconciliation queue make exactly the queries of PAGES with 3 runs and with 60
(no query per row, none hidden in a template), and a run's page the same with 2
batches as with 30. Counts stop at COUNT_CAP, and past it the list still pages. How
long the pages take with 100,000 runs is measured by `make bench-ui` (bench/ui.py),
not asserted here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from runs import engine
from runs.models import Claim, Run, SubmissionKey
from runs.states import RunStatus
from runs.web import queries as web_queries
from tests.support.factories import crashed, run_queued
from tests.support.markup import folded

HTMX_RUNS = {"HX-Request": "true", "HX-Target": "runs"}

# Every page pays for the layout: the session, the user and the navigation's queue
# badge (runs/pages/layout.py), and the user's role (its groups: operators are not
# superusers, they reach the admin through their group's permissions).
LAYOUT = 4

# name -> (path, given the runs made; the page's queries beyond the layout's). Every
# page that shows runs also reads the pauses in effect (one query; the waiting steps of
# the runs shown are read only when a pause holds their workflow, which none does here).
PAGES: dict[str, tuple[Callable[[dict[str, Any]], str], int]] = {
    # a capped COUNT and one page of runs, and the pauses
    "list": (lambda d: "/runs/", 3),
    "list, page 2": (lambda d: "/runs/?page=2", 3),
    "list, htmx swap": (lambda d: "/runs/?status=failed", 3),
    "status": (lambda d: "/runs/?status=failed", 3),
    "workflow": (lambda d: "/runs/?workflow=charge-payment", 3),
    "created range": (lambda d: f"/runs/?created_after={d['yesterday']}", 3),
    "status, workflow, created range": (
        lambda d: (
            f"/runs/?status=succeeded&workflow=charge-payment"
            f"&created_after={d['yesterday']}&created_before={d['tomorrow']}"
        ),
        3,
    ),
    # search: a run id needs no lookup; anything else looks for claim and submission
    # keys in one query (and, if it is hex, for runs whose id starts with it)
    "search, run id": (lambda d: f"/runs/?q={d['run_id']}", 3),
    "search, claim key": (lambda d: f"/runs/?q={d['claim_key']}", 4),
    "search, submission key": (lambda d: f"/runs/?q={d['submission_key']}", 4),
    "search, run id prefix": (lambda d: f"/runs/?q={d['run_id'][:8]}", 5),
    # (nothing found: the list is known to be empty without asking)
    "search, no such thing": (lambda d: "/runs/?q=no-such-key", 1),
    # counts per status, queue summary, recent failures, now + steps per minute, the
    # pauses (its Paused panel and the recent runs' marks share them), the recent runs,
    # the incident groups (one GROUP BY)
    "overview": (lambda d: "/", 8),
    # the queue's capped count and page of claims, the workflows it holds, their pauses,
    # the incident groups
    "reconciliation queue": (lambda d: "/reconciliation/", 5),
}


def make_runs(n: int, start: int = 0) -> None:
    """`n` runs made by the engine, a quarter of each: a payment charged under a
    submission key, a run failed, a merge whose worker died (its claim waits in the
    queue), a run cancelled."""
    merges = 0
    for i in range(start, start + n):
        kind = i % 4
        if kind == 0:
            submission = engine.submit(
                workflow="charge-payment", input={"amount": i + 1}, key=f"order-{i}"
            )
            run_queued(submission.run)
        elif kind == 1:
            run_queued(engine.submit_run(workflow="fork-fail", input={}))
        elif kind == 2:
            merges += 1
        else:
            run = engine.submit_run(workflow="pure-chain", input={})
            engine.cancel_run(run_id=run.id, actor="olivia", reason="not needed")
    if merges:
        crashed("merge-change", count=merges)


def data() -> dict[str, Any]:
    charge = Run.objects.filter(workflow="charge-payment").order_by("created_at").first()
    assert charge is not None
    claim = Claim.objects.filter(run__workflow="merge-change").order_by("id").first()
    assert claim is not None
    today = timezone.localdate()
    return {
        "run_id": str(charge.id),
        "claim_key": claim.key,
        "submission_key": SubmissionKey.objects.order_by("key").values_list("key", flat=True)[0],
        "yesterday": (today - timedelta(days=1)).isoformat(),
        "tomorrow": (today + timedelta(days=1)).isoformat(),
    }


@pytest.mark.parametrize("runs", [3, 60])
def test_pages_make_the_same_queries_with_3_and_with_60_runs(
    operator_client, django_assert_num_queries, runs
):
    make_runs(runs)
    assert Run.objects.count() == runs
    given = data()
    for name, (path_of, queries) in PAGES.items():
        path = path_of(given)
        headers = HTMX_RUNS if "htmx" in name else {}
        with django_assert_num_queries(LAYOUT + queries, info=f"{name}: GET {path}"):
            response = operator_client.get(path, headers=headers)
        assert response.status_code == 200, (name, path)


def test_pages_show_what_they_found(operator_client):
    """The paths of PAGES find what they look for (so their counts mean something)."""
    make_runs(8)
    given = data()
    for name in ("search, run id", "search, run id prefix", "search, submission key"):
        page = folded(operator_client.get(PAGES[name][0](given)).content)
        assert "1 run match" in page and given["run_id"][:8] in page, name
    claim_run = Claim.objects.get(key=given["claim_key"]).run_id
    page = folded(operator_client.get(PAGES["search, claim key"][0](given)).content)
    assert "1 run match" in page and str(claim_run)[:8] in page
    page = folded(operator_client.get("/runs/?status=failed").content)
    assert "2 runs match" in page
    queue = operator_client.get("/reconciliation/").content.decode()
    assert "2 unresolved claims" in queue


# The run page (runs/web/queries.py): the run, its steps, their attempts, its step claims,
# its map items counted, its event types, and the event log's count and page (or, on
# the page with the timeline, its marks and a page, the count taken from the types),
# and the signals it received, and its workflow's pauses and their audit rows (what the
# timeline says held the run). A run of a workflow that declares search fields adds one,
# its search keys (migrate-records declares none).
RUN_PAGE = 11


@pytest.mark.parametrize("items", [4, 60])
def test_run_page_makes_the_same_queries_whatever_the_size_of_the_run(
    operator_client, django_assert_num_queries, items
):
    """2 batches and a dozen events, or 30 batches and two pages of events."""
    run = engine.submit_run(workflow="migrate-records", input={"count": items, "batch_size": 2})
    run_queued(run)
    for query in ("", "?page=2", "?type=batch_finished"):
        path = f"/runs/{run.id}/{query}"
        with django_assert_num_queries(LAYOUT + RUN_PAGE, info=f"GET {path}"):
            response = operator_client.get(path)
        assert response.status_code == 200, path


@pytest.fixture
def small_cap(monkeypatch):
    """Counts stop at 5 and the list shows 5 runs a page."""
    monkeypatch.setattr(web_queries, "COUNT_CAP", 5)
    monkeypatch.setattr(web_queries, "RUNS_PER_PAGE", 5)


def submitted(n: int) -> list[Run]:
    """`n` runs just submitted (the cheapest runs there are), newest first."""
    runs = [engine.submit_run(workflow="pure-chain", input={}) for _ in range(n)]
    return sorted(runs, key=lambda r: (r.created_at, r.id), reverse=True)


def test_runs_list_counts_up_to_the_cap_then_says_more_than(
    operator_client, small_cap, django_assert_num_queries
):
    runs = submitted(12)
    with django_assert_num_queries(LAYOUT + 3):
        first = operator_client.get("/runs/").content.decode()
    assert "more than 5 runs" in first
    assert "page 1</span>" in first and "page 1 of" not in first  # no last page known
    assert "older →" in first
    assert all(str(r.id)[:8] in first for r in runs[:5])
    assert not any(str(r.id)[:8] in first for r in runs[5:])
    # Past the cap, a page knows there is a next one from the one row it reads beyond.
    with django_assert_num_queries(LAYOUT + 3):
        third = operator_client.get("/runs/?page=3").content.decode()
    assert all(str(r.id)[:8] in third for r in runs[10:])
    assert "older →" not in third and "← newer" in third


def test_runs_list_under_the_cap_counts_exactly(operator_client, small_cap):
    submitted(4)
    page = operator_client.get("/runs/").content.decode()
    assert "4 runs" in page and "more than" not in page


def test_runs_list_past_the_last_page_shows_a_page_that_has_runs(operator_client, small_cap):
    runs = submitted(12)
    page = operator_client.get("/runs/?page=99").content.decode()
    shown = [r for r in runs if str(r.id)[:8] in page]
    assert len(shown) == 5  # the last page the capped count vouches for: runs 6 to 10
    page = operator_client.get("/runs/?page=nonsense").content.decode()
    assert str(runs[0].id)[:8] in page


def test_overview_counts_each_status_up_to_the_cap(operator_client, small_cap):
    (waiting,) = {run.status for run in submitted(7)}
    run_queued(engine.submit_run(workflow="fork-fail", input={}))
    labels = {c.status: c.label for c in web_queries.counts_by_status()}
    assert labels == {
        **{status: "0" for status in RunStatus.values},
        waiting: "5+",
        RunStatus.FAILED: "1",
    }
    page = operator_client.get("/").content.decode()
    more = 'title="more than 5 runs (counting stops there)"'
    assert f'href="/runs/?status={waiting}" {more}><span class="n">5+</span>' in page
    assert 'href="/runs/?status=failed"><span class="n">1</span>' in page
