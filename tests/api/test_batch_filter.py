"""One filter for both doors of a batch (docs/api.md#batches): the page /runs/bulk/ and
POST /api/batches/ take the runs list's whole filter (`q`, `field` and `value`
included), and the batch records it whole, so its audit (the preview, the batch's page,
the API's `filter`) says what selected its runs and "the runs list, with this filter"
lists only them. A property test proves the recorded filter (`selection.normalized`)
selects, parsed again, exactly the runs the original did, or is refused the same way."""

from __future__ import annotations

import html
import re
import uuid
from datetime import timedelta

import pytest
from django.http import QueryDict
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs import engine
from runs.batches import selection
from runs.errors import InvalidBatch
from runs.models import Batch, BatchItem, Run
from runs.states import RunStatus
from tests.support.api import token_client
from tests.support.batches import failed_runs


def text(response) -> str:
    return html.unescape(response.content.decode())


@pytest.fixture
def changes(db):
    """Two merge-change runs (active, pending) told apart only by their search field."""
    return {
        n: engine.submit_run(workflow="merge-change", input={"change_id": n}) for n in (301, 302)
    }


def listed_ids(client, query: str) -> list[str]:
    page = text(client.get(f"/runs/?{query}"))
    return re.findall(r'href="/runs/([0-9a-f-]{36})/"', page)


def test_a_batch_made_on_the_page_by_a_search_field_records_it_and_its_link_lists_only_its_run(
    operator_client, changes
):
    preview = text(operator_client.get("/runs/bulk/?operation=cancel&field=change_id&value=301"))
    assert "Filter: <code>field=change_id&value=301</code>" in preview

    response = operator_client.post(
        "/runs/bulk/?operation=cancel&field=change_id&value=301", {"reason": "wrong change"}
    )

    batch = Batch.objects.get()
    assert response.status_code == 302, response.content
    assert batch.filter == "field=change_id&value=301"
    assert list(BatchItem.objects.values_list("run_id", flat=True)) == [changes[301].id]
    page = text(operator_client.get(f"/runs/batches/{batch.id}/"))
    assert "<dd><code>field=change_id&value=301</code></dd>" in page
    assert "none (every run)" not in page
    assert 'href="/runs/?field=change_id&value=301">The runs list, with this filter' in page
    # Followed, the link lists that run only, and a batch made from there acts on it only.
    assert set(listed_ids(operator_client, batch.filter)) == {str(changes[301].id)}
    again = selection.preview("cancel", QueryDict(batch.filter))
    assert (again.matched, [s.run_id for s in again.samples]) == (1, [changes[301].id])


def test_a_batch_made_through_the_api_by_a_search_field_records_it(operator, changes):
    api = token_client(operator)
    body = {
        "operation": "cancel",
        "filter": {"field": "change_id", "value": "301"},
        "reason": "wrong change",
    }

    preview = api.post(
        "/api/batches/preview/", {k: v for k, v in body.items() if k != "reason"}, format="json"
    )
    response = api.post("/api/batches/", body, format="json")

    assert preview.status_code == 200, preview.content
    assert (preview.json()["filter"], preview.json()["matched"]) == ("field=change_id&value=301", 1)
    assert response.status_code == 202, response.content
    assert response.json()["filter"] == "field=change_id&value=301"
    assert response.json()["counts"]["total"] == 1
    items = api.get(f"{response['Location']}items/").json()["results"]
    assert [i["run_id"] for i in items] == [str(changes[301].id)]


def test_the_api_takes_the_search_box_as_the_page_does(operator, changes):
    api = token_client(operator)
    body = {"operation": "cancel", "filter": {"q": str(changes[302].id)[:8]}, "reason": "r"}

    response = api.post("/api/batches/", body, format="json")

    assert response.status_code == 202, response.content
    assert response.json()["filter"] == f"q={str(changes[302].id)[:8]}"
    assert list(BatchItem.objects.values_list("run_id", flat=True)) == [changes[302].id]


@pytest.mark.parametrize(
    ("query", "message", "api_message"),
    [
        ("field=nope&value=1", "unknown search field 'nope'", '"nope" is not a valid choice.'),
        (
            "value=301",
            "choose the search field this value is of",
            "field: choose the search field this value is of",
        ),
    ],
)
def test_a_search_field_the_list_refuses_refuses_the_batch_on_both_doors(
    operator, operator_client, changes, query, message, api_message
):
    """Before, the page dropped a refused search field and selected every run."""
    page = operator_client.post(f"/runs/bulk/?operation=cancel&{query}", {"reason": "r"})
    body = {"operation": "cancel", "reason": "r", "filter": dict(QueryDict(query).items())}
    api = token_client(operator).post("/api/batches/", body, format="json")

    assert page.status_code == 400 and message in text(page)
    assert api.status_code == 400, api.content
    assert api.json()["error"]["fields"]["filter.field"] == [api_message]
    assert not Batch.objects.exists()


# --- the property: parse(normalized(p)) selects what parse(p) selects ---------------------
def selected(params: QueryDict) -> tuple[str, frozenset[uuid.UUID] | str]:
    """What the filter selects (every matching run's id), or the parameter it is refused
    for."""
    try:
        filters = selection.parse(params)
    except InvalidBatch as exc:
        return "refused", exc.field
    return "selects", frozenset(selection.selection(filters).values_list("id", flat=True))


@pytest.fixture
def varied_runs(db, monkeypatch):
    """Runs that differ in every way a filter tells runs apart: workflow, status, created
    time, search field values (two workflows share `change_id`), submission keys."""
    runs = []
    for n in (301, 302, 303):  # pending, pending, cancelled
        runs.append(engine.submit_run(workflow="merge-change", input={"change_id": n}))
    runs.append(engine.submit_run(workflow="merge-change-probed", input={"change_id": 301}))
    runs.append(engine.submit_run(workflow="charge-payment", input={"amount": 301}))
    runs.append(engine.submit(workflow="pure-chain", input={}, key="order-301").run)
    runs.append(engine.submit_run(workflow="search-order", input={"order": "A-1", "note": ""}))
    now = timezone.now()
    for age, run in enumerate(runs):
        Run.objects.filter(pk=run.pk).update(created_at=now - timedelta(days=age))
    engine.cancel_run(run_id=runs[2].id, actor="test")
    runs.extend(failed_runs(monkeypatch, 2))
    return runs


def filter_values(runs: list[Run]) -> st.SearchStrategy[str]:
    meaningful = [
        *RunStatus.values,
        "merge-change",
        "merge-change-probed",
        "charge-payment",
        "pure-chain",
        "change_id",
        "amount",
        "order",
        "customer",
        "nope",
        "301",
        "302",
        "A-1",
        "order-301",
        *(str(run.id) for run in runs),
        *(str(run.id)[:8] for run in runs),
        *(str(run.id)[:3] for run in runs),
        (timezone.localdate() - timedelta(days=2)).isoformat(),
        timezone.localdate().isoformat(),
        f"{timezone.localdate().isoformat()}T00:00",
        "2026-02-30",
        "someday",
        "",
        " ",
    ]
    padding = st.sampled_from(["", " ", "\t", "\n "])
    typed = st.text(
        alphabet=st.characters(blacklist_categories=("Cs",)), max_size=12
    )  # a query string carries no lone surrogate
    return st.one_of(
        st.builds(lambda a, v, b: a + v + b, padding, st.sampled_from(meaningful), padding),
        typed,
    )


# Every parameter the runs list reads (runs/reads/filters.py parse_filters), and some it does
# not: written out, not taken from selection.FILTER_PARAMS, which is what is under test.
LIST_PARAMS = ("q", "field", "value", "status", "workflow", "created_after", "created_before")
NAMES = st.sampled_from([*LIST_PARAMS, "operation", "page", "ordering", "other"])


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_the_recorded_filter_selects_exactly_what_the_filter_selected(varied_runs, data):
    pairs = data.draw(st.lists(st.tuples(NAMES, filter_values(varied_runs)), max_size=6))
    params = QueryDict(mutable=True)
    for name, value in pairs:
        params.appendlist(name, value)

    recorded = selection.normalized(params)

    assert selected(QueryDict(recorded)) == selected(params), (params, recorded)
    # And the recorded filter is its own normal form: recording it again changes nothing.
    assert selection.normalized(QueryDict(recorded)) == recorded


def test_each_parameter_of_the_filter_is_recorded(varied_runs):
    """Every parameter the runs list parses is one the filter records (the property
    above is only as good as this list)."""
    from runs.reads.filters import RunFilters, parse_filters

    query = "q=x&field=change_id&value=301&status=failed&workflow=w&created_after=2026-01-01"
    filters = parse_filters(QueryDict(f"{query}&created_before=2026-01-02"))
    assert isinstance(filters, RunFilters) and not filters.errors
    assert set(selection.FILTER_PARAMS) == set(LIST_PARAMS)
    recorded = selection.normalized(QueryDict(f"{query}&created_before=2026-01-02"))
    assert recorded == (
        "q=x&field=change_id&value=301&status=failed&workflow=w"
        "&created_after=2026-01-01&created_before=2026-01-02"
    )
