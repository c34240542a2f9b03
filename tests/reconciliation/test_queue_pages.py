"""The operator pages through Django's test client: who may do what, what each answer
contains, and that bad input changes nothing."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection
from django.test import Client

from reconciliation import services
from reconciliation.models import ClaimTake
from runs.models import Batch, Claim, Event, Run, Step
from runs.record import events
from runs.states import ClaimStatus, RunStatus, StepStatus
from tests.conftest import make_user
from tests.support import factories
from tests.support.markup import folded
from tests.support.races import Background

HTMX = {"HTTP_HX_REQUEST": "true"}


def posts(claim: Claim) -> list[tuple[str, dict]]:
    cid = claim.pk
    return [
        (
            f"/reconciliation/claims/{cid}/resolve/",
            {"outcome": "succeeded", "note": "seen on host"},
        ),
        (f"/reconciliation/claims/{cid}/take/", {}),
        (f"/reconciliation/claims/{cid}/release/", {}),
        (f"/reconciliation/claims/{cid}/check-again/", {}),
        (
            "/reconciliation/decide/?workflow=merge-change",
            {
                "outcome": "failed",
                "note": "x",
                "as_of": "2026-01-01T00:00:00+00:00",
                "confirm": "1",
            },
        ),
    ]


# --- permissions -------------------------------------------------------------------------
def test_every_post_refuses_a_viewer_and_changes_nothing(viewer_client):
    claim = factories.crashed_merge()
    for path, data in posts(claim):
        response = viewer_client.post(path, data, **HTMX)
        assert response.status_code == 403, path
    claim.refresh_from_db()
    assert claim.status == ClaimStatus.UNRESOLVED
    assert not ClaimTake.objects.exists()


def test_every_post_sends_anonymous_to_login(client, db):
    claim = factories.crashed_merge()
    for path, data in posts(claim):
        response = client.post(path, data)
        assert (response.status_code, response["Location"].split("?")[0]) == (302, "/login/")


def test_posts_need_the_csrf_token(operator):
    claim = factories.crashed_merge()
    strict = Client(enforce_csrf_checks=True)
    strict.force_login(operator)
    response = strict.post(
        f"/reconciliation/claims/{claim.pk}/resolve/",
        {"outcome": "succeeded", "note": "seen"},
        **HTMX,
    )
    assert response.status_code == 403
    claim.refresh_from_db()
    assert claim.status == ClaimStatus.UNRESOLVED


def test_viewer_sees_the_queue_and_the_detail_without_any_control(viewer_client):
    claim = factories.crashed_merge()
    page = viewer_client.get("/reconciliation/").content.decode()
    assert claim.key[:18] in page
    assert "Decide all" not in page and "Decide these" not in page and "Pause this" not in page
    detail = viewer_client.get(f"/reconciliation/claims/{claim.pk}/", **HTMX).content.decode()
    assert "Run input" in detail
    assert "Resolve claim" not in detail and "m on it" not in detail and "hx-post" not in detail
    assert "deciding it needs the operator role" in detail


def test_operator_sees_the_controls(operator_client):
    claim = factories.crashed_merge()
    page = operator_client.get(f"/reconciliation/?claim={claim.pk}").content.decode()
    assert "Decide all 1 unresolved…" in folded(page)
    assert "Decide these…" in page
    assert "Resolve claim" in page  # ?claim= opens that claim's detail
    assert "I&#x27;m on it" in page or "I'm on it" in page


def test_a_queue_link_to_a_claim_beyond_its_page_opens_the_claims_own_page(
    operator_client, monkeypatch
):
    from reconciliation import views

    monkeypatch.setattr(views, "PAGE_SIZE", 2)
    claims = factories.crashed("merge-change", count=3)
    on_page = operator_client.get(f"/reconciliation/?claim={claims[0].pk}")
    assert on_page.status_code == 200 and "Resolve claim" in on_page.content.decode()
    beyond = operator_client.get(f"/reconciliation/?claim={claims[2].pk}")
    assert (beyond.status_code, beyond["Location"]) == (
        302,
        f"/reconciliation/claims/{claims[2].pk}/",
    )


def test_the_claim_s_own_page_heads_every_column_of_its_table(operator_client):
    import re

    claim = factories.crashed_merge(change_id=9)
    page = operator_client.get(f"/reconciliation/claims/{claim.pk}/").content.decode()
    table = re.search(r'aria-label="The claim"><table class="queue">(.*?)</table>', page, re.S)
    assert table is not None
    heads = re.findall(r'<th scope="col"', table[1])
    cells = re.search(r'<tr class="[^"]*">(.*?)</tr>', table[1], re.S)
    assert cells is not None
    assert len(heads) == cells[1].count("<td") == 10


# --- the queue ----------------------------------------------------------------------------
def test_queue_lists_unresolved_claims_oldest_first_with_why(operator_client):
    died = factories.crashed_merge(change_id=1)
    raised = factories.raised("flaky-merge", change_id=2, mode="timeout")
    page = operator_client.get("/reconciliation/").content.decode()
    first, second = page.index(f'id="claim-{died.pk}"'), page.index("flaky-merge@1")
    assert first < second
    assert "worker died" in page and "raised an error" in page
    assert "TimeoutError: code host did not answer within 30s" in page
    assert raised.status == RunStatus.NEEDS_RECONCILIATION
    assert "2 unresolved claims" in page


def test_queue_filters_by_workflow_and_age(operator_client):
    factories.crashed_merge(change_id=1)
    factories.raised("flaky-merge", change_id=2, mode="timeout")
    page = operator_client.get("/reconciliation/?workflow=flaky-merge").content.decode()
    assert "flaky-merge@1" in page and "merge-change@1" not in page
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_claim SET unresolved_at = now() - interval '2 hours' "
            "WHERE run_id IN (SELECT id FROM runs_run WHERE workflow = 'merge-change')"
        )
    page = operator_client.get("/reconciliation/?age=1h").content.decode()
    assert "merge-change@1" in page and "flaky-merge@1" not in page
    assert 'class="stale"' in page  # older than RECONCILIATION_STALE_MINUTES


def test_queue_htmx_filter_answers_only_the_table(operator_client):
    factories.crashed_merge()
    response = operator_client.get(
        "/reconciliation/?workflow=merge-change", HTTP_HX_TARGET="queue", **HTMX
    )
    html = response.content.decode()
    assert html.lstrip().startswith('<div id="queue">')
    assert "<html" not in html


def test_queue_page_with_200_claims_takes_a_fixed_number_of_queries(
    operator_client, django_assert_max_num_queries
):
    factories.crashed("merge-change", count=200)
    with django_assert_max_num_queries(12):
        response = operator_client.get("/reconciliation/")
    assert response.content.decode().count('<tbody id="claim-') == 200


def test_badge_counts_unresolved_claims(operator_client):
    factories.crashed("merge-change", count=3)
    html = operator_client.get("/reconciliation/badge/", **HTMX).content.decode()
    assert 'id="queue-badge"' in html and ">3</span>" in html
    assert "every 5s" in html and "data-poll" in html


# --- deciding -----------------------------------------------------------------------------
def test_resolve_removes_the_row_updates_the_badge_and_links_the_run(operator_client, operator):
    claim = factories.crashed_merge()
    factories.crashed_merge(change_id=2)
    response = operator_client.post(
        f"/reconciliation/claims/{claim.pk}/resolve/",
        {"outcome": "succeeded", "note": "merge 77 on the host", "result": '{"merge_id": 77}'},
        **HTMX,
    )
    assert response.status_code == 200
    assert (response["HX-Retarget"], response["HX-Reswap"]) == (f"#claim-{claim.pk}", "delete")
    html = response.content.decode()
    assert f'href="/runs/{claim.run_id}/"' in html  # the confirmation links the run
    assert 'id="queue-badge"' in html and ">1</span>" in html  # out of band
    claim.refresh_from_db()
    assert (claim.status, claim.resolved_by, claim.result) == (
        ClaimStatus.SUCCEEDED,
        "olivia",
        {"merge_id": 77},
    )
    assert Run.objects.get(pk=claim.run_id).status == RunStatus.SUCCEEDED


@pytest.mark.parametrize(
    ("data", "field", "message"),
    [
        ({"outcome": "succeeded", "note": "ok", "result": "{nope"}, "result", "not valid JSON"),
        ({"outcome": "succeeded", "note": "  "}, "note", "needs a note"),
        ({"outcome": "maybe", "note": "ok"}, "outcome", "outcome must be"),
        ({"outcome": "failed", "note": "ok", "result": "1"}, "result", "has no result"),
    ],
)
def test_resolve_bad_input_shows_the_error_by_the_field_and_changes_nothing(
    operator_client, data, field, message
):
    claim = factories.crashed_merge()
    before = Event.objects.count()
    response = operator_client.post(f"/reconciliation/claims/{claim.pk}/resolve/", data, **HTMX)
    assert response.status_code == 422
    html = response.content.decode()
    assert html.lstrip().startswith("<form")
    assert message in html
    # the error sits in the field's own block, which is marked invalid
    block = html[: html.index(message)].rsplit('class="field', 1)[1]
    assert block.startswith(" invalid")
    assert f'name="{field}"' in block or field == "outcome"
    claim.refresh_from_db()
    assert (claim.status, Event.objects.count()) == (ClaimStatus.UNRESOLVED, before)


def test_resolve_double_submit_resolves_once(operator_client):
    claim = factories.crashed_merge()
    data = {"outcome": "failed", "note": "no merge on the host"}
    first = operator_client.post(f"/reconciliation/claims/{claim.pk}/resolve/", data, **HTMX)
    second = operator_client.post(f"/reconciliation/claims/{claim.pk}/resolve/", data, **HTMX)
    assert (first.status_code, second.status_code) == (200, 200)
    assert "your first submit had already counted" in second.content.decode()
    assert Event.objects.filter(run=claim.run, type=events.CLAIM_RESOLVED).count() == 1
    assert Step.objects.get(run=claim.run).status == StepStatus.QUEUED  # retried once


def test_resolve_after_someone_else_shows_who_when_what(operator_client):
    claim = factories.crashed_merge()
    bob = make_user("bob", "operators")
    other = Client()
    other.force_login(bob)
    other.post(
        f"/reconciliation/claims/{claim.pk}/resolve/",
        {"outcome": "failed", "note": "bob checked"},
        **HTMX,
    )
    response = operator_client.post(
        f"/reconciliation/claims/{claim.pk}/resolve/",
        {"outcome": "succeeded", "note": "I saw it merged"},
        **HTMX,
    )
    assert response.status_code == 409
    html = response.content.decode()
    assert "already resolved as failed by bob" in html
    assert response["HX-Retarget"] == f"#claim-{claim.pk}"
    claim.refresh_from_db()
    assert (claim.status, claim.resolved_by) == (ClaimStatus.FAILED, "bob")


@pytest.mark.django_db(transaction=True)
def test_resolve_from_two_operators_at_once_one_wins():
    claim = factories.crashed_merge()
    users = [make_user("ann", "operators"), make_user("bob", "operators")]
    barrier = threading.Barrier(2)

    def decide(user, outcome):
        def go():
            c = Client()
            c.force_login(user)
            barrier.wait()
            return c.post(
                f"/reconciliation/claims/{claim.pk}/resolve/",
                {"outcome": outcome, "note": f"{user.username} decided"},
                **HTMX,
            ).status_code

        return go

    a = Background(decide(users[0], "succeeded"))
    b = Background(decide(users[1], "failed"))
    assert sorted([a.join(), b.join()]) == [200, 409]
    claim.refresh_from_db()
    assert claim.resolved_by in ("ann", "bob")
    assert Event.objects.filter(type=events.CLAIM_RESOLVED).count() == 1


def test_resolve_escapes_a_hostile_late_result(operator_client):
    hostile = "<script>alert('x')</script>"
    run = factories.raised("flaky-merge", change_id=9, mode="timeout")
    claim = Claim.objects.get(run=run)
    Claim.objects.filter(pk=claim.pk).update(evidence={"late_result": {"title": hostile}})
    Step.objects.filter(run=run).update(error=hostile)
    html = operator_client.get(f"/reconciliation/claims/{claim.pk}/", **HTMX).content.decode()
    assert hostile not in html
    assert "&lt;script&gt;" in html


# --- taking ------------------------------------------------------------------------------
def test_take_is_shown_to_everyone_and_refused_to_a_second_operator(operator_client, viewer):
    claim = factories.crashed_merge()
    response = operator_client.post(f"/reconciliation/claims/{claim.pk}/take/", **HTMX)
    assert response.status_code == 200
    assert "You are on claim" in response.content.decode()
    watcher = Client()
    watcher.force_login(viewer)
    assert ">olivia</span>" in watcher.get("/reconciliation/").content.decode()

    bob = Client()
    bob.force_login(make_user("bob", "operators"))
    refused = bob.post(f"/reconciliation/claims/{claim.pk}/take/", **HTMX).content.decode()
    assert "was taken by olivia" in refused and "you can take it over at" in refused
    assert ClaimTake.objects.get().taken_by.username == "olivia"


def test_take_expires_and_is_released_on_resolution(operator_client):
    claim = factories.crashed_merge()
    operator_client.post(f"/reconciliation/claims/{claim.pk}/take/", **HTMX)
    with connection.cursor() as cursor:  # time passes: the take ended a second ago
        cursor.execute(
            "UPDATE reconciliation_claimtake SET taken_at = now() - interval '31 minutes', "
            "expires_at = now() - interval '1 second'"
        )
    page = operator_client.get("/reconciliation/").content.decode()
    assert ">olivia</span>" not in page  # expired takes are not shown
    bob = Client()
    bob.force_login(make_user("bob", "operators"))
    bob.post(f"/reconciliation/claims/{claim.pk}/take/", **HTMX)
    assert ClaimTake.objects.get().taken_by.username == "bob"
    bob.post(
        f"/reconciliation/claims/{claim.pk}/resolve/",
        {"outcome": "failed", "note": "nothing merged"},
        **HTMX,
    )
    assert not ClaimTake.objects.exists()


# --- incidents and "decide all N matching" ------------------------------------------------
def test_the_queue_and_the_overview_group_the_claims_by_cause(operator_client):
    factories.crashed("merge-change", count=3)
    factories.crashed("merge-change-probed", count=1)

    for path in ("/reconciliation/", "/"):
        html = folded(operator_client.get(path).content)
        groups = re.findall(r'<li class="incident panel">.*?</li>', html, re.S)
        titles = [
            " ".join(re.sub(r"<[^>]+>", " ", re.search(r"<h3.*?</h3>", g, re.S).group(0)).split())
            for g in groups
        ]
        assert titles == [
            "3 claims · merge-change · merge",
            "1 claim · merge-change-probed · merge",
        ], path
        assert (
            'href="/reconciliation/decide/?workflow=merge-change&amp;step=merge&amp;cause=worker'
            in (groups[0])
        )
        assert "/pauses/?workflow=merge-change&amp;step=merge#pause-title" in groups[0]


def test_the_groups_poll_themselves_with_the_queues_filter(operator_client):
    factories.crashed("merge-change", count=2)
    response = operator_client.get(
        "/reconciliation/?workflow=merge-change",
        HTTP_HX_REQUEST="true",
        HTTP_HX_TARGET="incident-groups",
    )
    html = folded(response.content)
    assert html.lstrip().startswith('<div id="incident-groups"')
    assert 'hx-get="/reconciliation/?workflow=merge-change"' in html
    assert "2 claims · merge-change · merge" in " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_the_groups_poll_brings_who_is_on_each_claim_of_the_page(operator_client):
    claims = factories.crashed("merge-change", count=2)
    services.take_claim(claim_id=claims[1].pk, user=make_user("bob", "operators"))

    html = folded(
        operator_client.get(
            f"/reconciliation/?shown={claims[0].pk}&shown={claims[1].pk}&shown=x",
            HTTP_HX_REQUEST="true",
            HTTP_HX_TARGET="incident-groups",
        ).content
    )

    fresh = re.search(r"<template data-fresh-cells>(.*?)</template>", html).group(1)
    cells = re.findall(r'<td data-label="on it" id="on-it-(\d+)"[^>]*>(.*?)</td>', fresh)
    said = {int(claim_id): re.sub(r"<[^>]+>", "", text).strip() for claim_id, text in cells}
    assert said == {claims[0].pk: "—", claims[1].pk: "bob"}
    # The page itself carries no fresh copies.
    page = folded(operator_client.get("/reconciliation/").content)
    assert 'id="on-it-' in page and "data-fresh-cells" not in page


def test_a_claim_links_to_the_runs_of_the_same_business_key(operator_client):
    claim = factories.crashed_merge(change_id=301)
    factories.crashed_merge(change_id=301, workflow="merge-change-probed")

    html = folded(operator_client.get(f"/reconciliation/claims/{claim.pk}/").content)

    assert (
        '<dt>change_id</dt><dd class="search-key"><code>301</code> · '
        '<a href="/runs/?field=change_id&amp;value=301">Runs with the same change_id</a></dd>'
    ) in html
    listed = operator_client.get("/runs/?field=change_id&value=301").content.decode()
    assert listed.count("merge-change") >= 2


def test_a_filtered_queue_that_empties_says_how_many_others_wait(operator_client):
    factories.crashed("merge-change", count=1)
    factories.crashed("merge-change-probed", count=2)
    (claim,) = Claim.objects.filter(run__workflow="merge-change")
    services.resolve(
        claim_id=claim.pk, user=make_user("bob", "operators"), outcome="failed", note="x"
    )

    html = folded(operator_client.get("/reconciliation/?workflow=merge-change").content)

    assert "No claim matches these filters; 2 others wait:" in html
    assert "Every effect's outcome is known" not in html
    # The workflow filter still names the workflow, with no stale count.
    assert '<option value="merge-change" selected>merge-change</option>' in html


def test_the_decide_page_has_no_default_outcome_and_refuses_none_beside_the_field(
    operator_client,
):
    factories.crashed("merge-change", count=2)
    url = "/reconciliation/decide/?workflow=merge-change"
    page = folded(operator_client.get(url).content)
    assert "What happened to these 2 effects?" in page
    assert " checked" not in page

    refused = operator_client.get(url, {"outcome": "", "note": "host was down", "preview": "1"})

    html = folded(refused.content)
    assert refused.status_code == 422
    assert 'id="outcome-error">choose what happened to the effects: succeeded or failed</p>' in html
    assert "host was down</textarea>" in html
    assert not Batch.objects.exists()


def test_the_decide_preview_puts_confirm_under_its_summary_and_writes_nothing(operator_client):
    factories.crashed("merge-change", count=3)
    returned = factories.late_answer_kept("return")
    before = Event.objects.count()
    url = "/reconciliation/decide/"

    response = operator_client.get(
        url, {"outcome": "failed", "note": "none merged", "preview": "1"}
    )

    html = folded(response.content)
    assert response.status_code == 200
    summary = html.index("Preview: resolve 3 claims as failed")
    confirm = html.index("Confirm: resolve 3 claims as failed")
    consequences = html.index("What it does")
    aside = html.index("Set aside: decide one by one (1)")
    assert summary < confirm < consequences and confirm < aside
    assert "<strong>3</strong> claims: step merge retried: attempt 2 of 3; the run resumes" in html
    assert f'href="/reconciliation/claims/{returned.pk}/"' in html
    assert Event.objects.count() == before and not Batch.objects.exists()


def test_confirming_makes_a_resolve_batch_and_goes_to_its_page(operator_client):
    claims = factories.crashed("merge-change", count=2)
    url = "/reconciliation/decide/?workflow=merge-change"
    preview = folded(operator_client.get(url + "&preview=1&outcome=failed&note=host+down").content)
    as_of = re.search(r'name="as_of" value="([^"]+)"', preview).group(1)

    response = operator_client.post(url, {"outcome": "failed", "note": "host down", "as_of": as_of})

    batch = Batch.objects.get()
    assert (response.status_code, response["Location"]) == (302, f"/runs/batches/{batch.id}/")
    assert (batch.operation, batch.outcome, batch.filter, batch.total) == (
        "resolve",
        "failed",
        "workflow=merge-change",
        2,
    )
    assert sorted(batch.items.values_list("claim_id", flat=True)) == sorted(c.pk for c in claims)
    page = folded(operator_client.get(f"/runs/batches/{batch.id}/").content)
    assert f"Batch {batch.id}: resolve matching claims as failed" in page
    assert "0 of 2 claims done" in page
    assert 'href="/reconciliation/?workflow=merge-change"' in page


def test_a_confirmation_without_its_preview_is_refused(operator_client):
    factories.crashed("merge-change", count=1)
    response = operator_client.post("/reconciliation/decide/", {"outcome": "failed", "note": "x"})
    assert response.status_code == 422
    assert "preview the decision first" in response.content.decode()
    assert not Batch.objects.exists()


def test_the_decide_page_refuses_a_bad_filter(operator_client):
    response = operator_client.get("/reconciliation/decide/?age=forever")
    assert response.status_code == 400
    assert "unknown age &#x27;forever&#x27;" in response.content.decode()


def test_a_late_result_and_a_take_show_on_the_phone_card(operator_client):
    returned = factories.late_answer_kept("return")
    html = operator_client.get("/reconciliation/").content.decode()
    row = re.search(rf'<tbody id="claim-{returned.pk}">.*?</tbody>', html, re.S).group(0)
    cell = re.search(r'<td data-label="evidence"[^>]*>', row).group(0)
    assert "hide-small" not in cell  # shown at 390 px too, labelled
    assert '<span class="status status-crashed">late result</span>' in row


# --- check again --------------------------------------------------------------------------
def test_check_again_before_the_grace_says_until_when(operator_client, settings):
    settings.RUNS_PROBE_GRACE_SECONDS = 600
    claim = factories.crashed_merge(workflow="merge-change-probed")
    response = operator_client.post(f"/reconciliation/claims/{claim.pk}/check-again/", **HTMX)
    assert "cannot be probed before" in response.content.decode()
    claim.refresh_from_db()
    assert claim.status == ClaimStatus.UNRESOLVED


def test_check_again_when_due_resolves_with_the_probe(operator_client):
    claim = factories.crashed_merge(workflow="merge-change-probed")
    Claim.objects.filter(pk=claim.pk).update(probe_after="2000-01-01T00:00:00Z")
    response = operator_client.post(f"/reconciliation/claims/{claim.pk}/check-again/", **HTMX)
    html = response.content.decode()
    assert "The probe found the effect not applied" in html
    assert response["HX-Reswap"] == "delete"
    claim.refresh_from_db()
    assert (claim.status, claim.resolved_by) == (ClaimStatus.FAILED, "probe")


# --- history ------------------------------------------------------------------------------
def test_history_lists_resolutions_with_filters(operator_client):
    claims = factories.crashed("merge-change", count=2)
    ann = Client()
    ann.force_login(make_user("ann", "operators"))
    ann.post(
        f"/reconciliation/claims/{claims[0].pk}/resolve/",
        {"outcome": "succeeded", "note": "ann saw it"},
        **HTMX,
    )
    operator_client.post(
        f"/reconciliation/claims/{claims[1].pk}/resolve/",
        {"outcome": "failed", "note": "olivia found nothing"},
        **HTMX,
    )
    page = operator_client.get("/reconciliation/history/").content.decode()
    assert "ann saw it" in page and "olivia found nothing" in page
    page = operator_client.get("/reconciliation/history/?operator=ann").content.decode()
    assert "ann saw it" in page and "olivia found nothing" not in page
    page = operator_client.get("/reconciliation/history/?outcome=failed").content.decode()
    assert "ann saw it" not in page and "olivia found nothing" in page
    page = operator_client.get("/reconciliation/history/?since=2000-01-01&until=2000-01-02")
    assert "No resolutions with these filters" in page.content.decode()


def test_history_and_the_claim_page_show_a_probe_answer_contradicting_the_resolution(
    operator_client,
):
    claim = factories.probe_contradicting_resolution(change_id=7)
    merged = Claim.objects.get(pk=claim.pk)  # the merge happened; ann said it did not

    history = folded(operator_client.get("/reconciliation/history/").content)
    flag = (
        f'<a class="status status-crashed" href="/reconciliation/claims/{claim.pk}/" '
        'title="a probe answered the opposite after this resolution: see the claim">'
        "probe disagrees</a>"
    )
    assert flag in history
    page = operator_client.get(f"/reconciliation/claims/{claim.pk}/").content.decode()
    notice = re.search(
        r'<div class="notice danger">\s*<p>\s*<strong>The probe found.*?</div>', page, re.S
    )
    assert notice is not None
    text = re.sub(r"<[^>]+>|\s+", " ", notice.group(0))
    assert "The probe found the effect applied" in text
    assert "after this claim was resolved as failed by ann" in text
    assert "The resolution is final and stands" in text
    assert "&quot;merged_at&quot;" in notice.group(0)  # the probe's evidence, escaped
    assert merged.status == ClaimStatus.FAILED


def test_history_bad_date_is_reported_next_to_its_field(operator_client):
    page = operator_client.get("/reconciliation/history/?since=yesterday").content.decode()
    assert "&#x27;yesterday&#x27; is not a date (YYYY-MM-DD)" in page


def test_run_page_shows_the_resolution_in_its_history(operator_client):
    claim = factories.crashed_merge()
    operator_client.post(
        f"/reconciliation/claims/{claim.pk}/resolve/",
        {"outcome": "succeeded", "note": "merged, see PR 9"},
        **HTMX,
    )
    page = operator_client.get(f"/runs/{claim.run_id}/").content.decode()
    assert "succeeded</strong> by <strong>olivia</strong>" in page
    assert "merged, see PR 9" in page
