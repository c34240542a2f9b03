"""Whatever a person (or a script) types into a page's filters and forms gets an answer
that says what is wrong, beside the field, never a server error: a NUL character, a
date that does not exist or is past the calendar's end, a number JSON cannot carry, a
document nested too deeply. The API refuses the same input with 400; the pages agree.
The property test throws arbitrary text at every page's query parameters and form
fields."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runs import engine
from runs.models import Claim, Run, Signal
from runs.testing import run_inline
from runs.web.forms import PREFIX
from tests.support import factories
from tests.support.markup import folded

pytestmark = pytest.mark.django_db

DEEP = "[" * 100_000


@pytest.mark.parametrize(
    ("url", "params", "field"),
    [
        ("/runs/", {"q": "a\x00b"}, "q"),
        ("/runs/", {"workflow": "\x00"}, "workflow"),
        ("/runs/", {"created_after": "2024-13-45"}, "created_after"),
        ("/runs/", {"created_before": "9999-12-31"}, "created_before"),
        ("/reconciliation/", {"workflow": "\x00"}, "workflow"),
        ("/reconciliation/history/", {"operator": "\x00"}, "operator"),
        ("/reconciliation/history/", {"until": "9999-12-31"}, "until"),
        ("/reconciliation/history/", {"since": "2024-02-30"}, "since"),
    ],
)
def test_a_filter_that_cannot_be_used_is_refused_beside_its_field(
    viewer_client, url, params, field
):
    response = viewer_client.get(url, params)
    assert response.status_code == 400, response.status_code
    page = folded(response.content)
    assert re.search(f'<p class="error" id="{field}-error" role="alert" [^>]*>[^<]+</p>', page)
    # The error describes the field first (the search box is also described by what
    # the search looked at, q-hint).
    assert re.search(f'aria-invalid="true" aria-describedby="{field}-error[" ]', page)


@pytest.mark.parametrize(
    ("url", "target", "params", "field"),
    [
        ("/runs/", "runs", {"created_before": "9999-12-31"}, "created_before"),
        ("/reconciliation/", "queue", {"workflow": "\x00"}, "workflow"),
        ("/reconciliation/history/", "history", {"until": "9999-12-31"}, "until"),
    ],
)
def test_an_htmx_filter_answer_sends_each_filters_problem_beside_its_field(
    viewer_client, url, target, params, field
):
    """htmx swaps the table, not the filters (one may be being typed in): the problem of
    each filter, or an empty slot for one that has none, comes out of band."""
    response = viewer_client.get(url, params, HTTP_HX_REQUEST="true", HTTP_HX_TARGET=target)
    assert response.status_code == 400, response.status_code
    page = folded(response.content)
    slot = f'<p class="error" id="{field}-error" role="alert" data-error-for="[^"]+" '
    assert re.search(slot + 'hx-swap-oob="true">[^<]+</p>', page), page
    assert re.search(
        '<p class="error" id="[a-z_]+-error" role="alert" data-error-for="[^"]+" '
        'hidden hx-swap-oob="true"></p>',
        page,
    )
    fine = viewer_client.get(url, HTTP_HX_REQUEST="true", HTTP_HX_TARGET=target)
    assert fine.status_code == 200
    assert re.search(slot + 'hidden hx-swap-oob="true"></p>', folded(fine.content))


@pytest.mark.parametrize("claim", ["-1", "0", "1.5", "\u0661", str(2**63)])
def test_a_claim_to_expand_that_no_claim_can_have_is_ignored(viewer_client, claim):
    """`?claim=` names a claim to open; a value no claim's id can be (negative, zero, not
    an ASCII integer, past a bigint) opens the queue as it is, not a server error."""
    response = viewer_client.get("/reconciliation/", {"claim": claim})
    assert response.status_code == 200, response.status_code
    assert response.templates[0].name == "reconciliation/queue.html"


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("result", "1e999", "too large"),
        ("result", DEEP, "nested too deeply"),
        ("result", '{"a": "x\\u0000y"}', "NUL"),
        ("note", "it \x00 merged", "NUL"),
        ("reference", "PR-\x00", "NUL"),
    ],
)
def test_a_decision_that_cannot_be_stored_is_refused_beside_its_field(
    operator_client, field, value, says
):
    claim = factories.crashed_merge()
    form = {"outcome": "succeeded", "note": "merged, see the log", "result": "", "reference": ""}
    form[field] = value
    response = operator_client.post(
        f"/reconciliation/claims/{claim.id}/resolve/", form, HTTP_HX_REQUEST="true"
    )
    assert response.status_code == 422, response.status_code
    assert says in response.content.decode()
    assert Claim.objects.get(pk=claim.id).status == "unresolved"


@pytest.mark.parametrize("payload", ["1e999", DEEP, '{"x": "\\u0000"}'])
def test_a_signal_payload_that_cannot_be_stored_is_refused(operator_client, payload):
    run = run_inline("wait-approval", input={"order": 1}, max_deliveries=3)
    response = operator_client.post(
        f"/runs/{run.id}/signal/", {"name": "approval", "payload": payload}
    )
    assert response.status_code < 500
    assert not Signal.objects.filter(run=run).exists()


# --- the property: no input makes a page answer 5xx ------------------------------------
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40) | st.sampled_from(
    ["\x00", "9999-12-31", "2024-13-45", "1e999", "-1", "0", "99999999999"]
)
PAGES = {
    "/runs/": ["q", "workflow", "status", "created_after", "created_before", "page"],
    "/reconciliation/": ["workflow", "age", "page", "claim"],
    "/reconciliation/history/": ["operator", "outcome", "workflow", "since", "until", "page"],
    "/runs/new/": ["workflow", "version"],
}
SETTINGS = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.mark.parametrize("url", list(PAGES))
@SETTINGS
@given(data=st.data())
def test_no_query_makes_a_page_fail(viewer_client, url, data):
    params = {name: data.draw(TEXT, label=name) for name in PAGES[url] if data.draw(st.booleans())}
    response = viewer_client.get(url, params)
    assert response.status_code < 500, (url, params, response.status_code)


@SETTINGS
@given(data=st.data())
def test_no_run_page_query_makes_it_fail(viewer_client, data):
    run = engine.submit_run(workflow="pure-chain", input={})
    params = {
        name: data.draw(TEXT, label=name)
        for name in ("page", "type", "expand", "collapse")
        if data.draw(st.booleans())
    }
    response = viewer_client.get(f"/runs/{run.id}/", params)
    assert response.status_code < 500, (params, response.status_code)


@SETTINGS
@given(data=st.data())
def test_no_decision_form_makes_it_fail(operator_client, data):
    claim = factories.crashed_merge(change_id=data.draw(st.integers(1, 10**6)))
    form = {
        name: data.draw(TEXT, label=name) for name in ("outcome", "note", "result", "reference")
    }
    response = operator_client.post(f"/reconciliation/claims/{claim.id}/resolve/", form)
    assert response.status_code < 500, (form, response.status_code)


@SETTINGS
@given(data=st.data())
def test_no_signal_or_cancel_form_makes_it_fail(operator_client, data):
    run = run_inline("wait-approval", input={"order": 1}, max_deliveries=3)
    signal = {"name": data.draw(TEXT, label="name"), "payload": data.draw(TEXT, label="payload")}
    assert operator_client.post(f"/runs/{run.id}/signal/", signal).status_code < 500
    reason = {"reason": data.draw(TEXT, label="reason")}
    assert operator_client.post(f"/runs/{run.id}/cancel/", reason).status_code < 500


@SETTINGS
@given(data=st.data())
def test_no_new_run_form_makes_it_fail(operator_client, data):
    form = {
        "workflow": "typed-order",
        f"{PREFIX}customer": data.draw(TEXT, label="customer"),
        f"{PREFIX}amount": data.draw(TEXT, label="amount"),
        f"{PREFIX}note": data.draw(TEXT, label="note"),
        "deadline_minutes": data.draw(TEXT, label="deadline_minutes"),
    }
    response = operator_client.post("/runs/new/", form)
    assert response.status_code < 500, (form, response.status_code)


@pytest.mark.parametrize(
    ("minutes", "says"),
    [
        ("soon", "a number of minutes, e.g. 30, not &#x27;soon&#x27;"),
        ("0", "more than 0 minutes from now"),
        ("-5", "more than 0 minutes from now"),
        ("nan", "more than 0 minutes from now"),
        ("inf", "more than 0 minutes from now"),
        ("1e300", "at most 527040 minutes (a year) from now"),
    ],
)
def test_a_deadline_that_is_no_time_ahead_is_refused_beside_its_field(
    operator_client, minutes, says
):
    form = {"workflow": "deadline-order", "deadline_minutes": minutes}
    response = operator_client.post("/runs/new/", form)
    html = response.content.decode()
    assert response.status_code == 200  # the form again, as Django forms answer
    assert re.search(r'<div id="in-deadline-error"><p class="error">([^<]*)</p>', html)[1] == says
    assert 'aria-invalid="true"' in html
    assert not Run.objects.exists()


@SETTINGS
@given(data=st.data())
def test_no_decision_over_a_filter_makes_it_fail(operator_client, data):
    factories.crashed_merge(change_id=data.draw(st.integers(1, 10**6)))
    query = {name: data.draw(TEXT, label=name) for name in ("workflow", "step", "cause", "age")}
    form = {
        "outcome": data.draw(TEXT | st.sampled_from(["succeeded", "failed"]), label="outcome"),
        "note": data.draw(TEXT, label="note"),
        "as_of": data.draw(TEXT | st.just("2026-12-04T10:00:00+00:00"), label="as_of"),
    }
    url = "/reconciliation/decide/?" + urlencode(query)
    previewed = operator_client.get(url + "&" + urlencode({**form, "preview": "1"}))
    assert previewed.status_code < 500, (url, form, previewed.status_code)
    confirmed = operator_client.post(url, form)
    assert confirmed.status_code < 500, (url, form, confirmed.status_code)


@SETTINGS
@given(data=st.data())
def test_no_retry_form_makes_it_fail(operator_client, data):
    run = run_inline("fork-fail")
    steps = data.draw(st.lists(TEXT | st.just("b"), max_size=3), label="step")
    for url in (f"/runs/{run.id}/retry/preview/", f"/runs/{run.id}/retry/"):
        response = operator_client.post(url, {"step": steps}, HTTP_HX_REQUEST="true")
        assert response.status_code < 500, (url, steps, response.status_code)
    response = operator_client.get(f"/runs/{run.id}/retry/preview/", {"step": steps})
    assert response.status_code < 500, (steps, response.status_code)


@SETTINGS
@given(data=st.data())
def test_no_claim_action_form_makes_it_fail(operator_client, data):
    claim = factories.crashed_merge(change_id=data.draw(st.integers(1, 10**6)))
    body = {name: data.draw(TEXT, label=name) for name in ("note", "claim", "next")}
    for action in ("take", "release", "check-again"):
        url = f"/reconciliation/claims/{claim.id}/{action}/"
        response = operator_client.post(url, body, HTTP_HX_REQUEST="true")
        assert response.status_code < 500, (url, body, response.status_code)


@SETTINGS
@given(data=st.data())
def test_no_login_form_makes_it_fail(client, data):
    form = {name: data.draw(TEXT, label=name) for name in ("username", "password")}
    response = client.post("/login/", form)
    assert response.status_code < 500, (form, response.status_code)
    next_url = data.draw(TEXT, label="next")
    assert client.get("/login/", {"next": next_url}).status_code < 500
