"""The page the product exists for, in a real browser: a real worker is killed after
its merge, and an operator decides the claim it left behind."""

from __future__ import annotations

import signal

import pytest

from examples.models import Merge
from runs import engine
from runs.models import Claim, Event
from runs.states import ClaimStatus, RunStatus
from tests.conftest import PASSWORD, make_user
from tests.support.waiting import wait_for

pytestmark = [pytest.mark.browser, pytest.mark.workers]


def merge_left_unresolved(cluster, change_id: int = 42):
    """merge-change on a worker that SIGKILLs itself after the merge; the sweeper makes
    its claim unresolved."""
    doomed = cluster.worker(faults="after_effect:merge")
    cluster.beat()
    run = engine.submit_run(workflow="merge-change", input={"change_id": change_id})
    assert doomed.wait_exit() == -signal.SIGKILL
    cluster.worker()
    claim = wait_for(
        lambda: Claim.objects.filter(run=run, status=ClaimStatus.UNRESOLVED).first(),
        what="the claim to become unresolved",
        on_timeout=cluster.logs,
    )
    assert Merge.objects.filter(run_id=run.id).count() == 1
    return run, claim


def test_operator_resolves_the_merge_of_a_killed_worker_and_the_run_finishes(cluster, browser):
    make_user("olivia", "operators")
    run, claim = merge_left_unresolved(cluster)
    merge = Merge.objects.get(run_id=run.id)

    browser.login("olivia", PASSWORD)
    page = browser.page
    assert page.locator("#queue-badge").inner_text() == "1"
    page.locator("nav").get_by_role("link", name="Reconciliation").click()
    row = page.locator(f"#claim-{claim.pk}")
    assert "worker died" in row.inner_text()
    page.evaluate("window.noReloadMarker = 'still here'")  # a reload would erase it
    browser.screenshot("queue")
    browser.screenshot("queue", width=390)

    row.get_by_role("link", name="Details").click()
    detail = page.locator(f"#detail-{claim.pk}")
    detail.wait_for()
    assert '"change_id": 42' in detail.inner_text()
    assert "crashed" in detail.locator("table").inner_text()
    browser.screenshot("queue-expanded")
    browser.screenshot("queue-expanded", width=390)

    form = page.locator(f"#resolve-{claim.pk}")
    form.get_by_label("succeeded: the effect happened").check()
    form.get_by_label("Result, as JSON").fill(f'{{"merge_id": {merge.id}, "change_id": 42}}')
    form.get_by_label("Note: how do you know?").fill("merge visible on the code host")
    form.get_by_role("button", name="Resolve claim").dblclick()  # a double click resolves once

    row.wait_for(state="detached")
    wait_for(lambda: page.locator("#queue-badge").inner_text() == "0", what="badge at 0")
    assert page.evaluate("window.noReloadMarker") == "still here"
    confirmation = page.locator("#messages li.success")
    assert "resolved as succeeded" in confirmation.inner_text()
    assert Event.objects.filter(run=run, type="claim_resolved").count() == 1

    confirmation.get_by_role("link").click()
    page.wait_for_url(f"**/runs/{run.id}/")
    assert "succeeded" in page.locator("h1").inner_text()
    assert "merge visible on the code host" in page.locator("#events").inner_text()
    run.refresh_from_db()
    assert run.status == RunStatus.SUCCEEDED
    assert Merge.objects.filter(run_id=run.id).count() == 1
    browser.screenshot("run-resolved")
    browser.screenshot("run-resolved", width=390)


def test_viewer_finds_no_resolve_control(cluster, browser):
    make_user("victor", "viewers")
    _, claim = merge_left_unresolved(cluster, change_id=7)

    browser.login("victor", PASSWORD)
    page = browser.goto("/reconciliation/")
    page.locator(f"#claim-{claim.pk}").get_by_role("link", name="Details").click()
    page.locator(f"#detail-{claim.pk}").wait_for()
    assert page.get_by_role("button", name="Resolve claim").count() == 0
    assert page.locator("input[name=claims]").count() == 0
    assert page.get_by_role("button", name="I'm on it").count() == 0
    assert "needs the operator role" in page.locator(f"#detail-{claim.pk}").inner_text()
    browser.screenshot("queue-viewer")
