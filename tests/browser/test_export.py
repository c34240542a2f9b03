"""The run page's "Export (JSON)": a plain download of the run's export document
(runs/record/export.py), for viewers and operators, beside the operations on the run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect

from runs.record.export_check import problems_of
from runs.testing import run_inline
from tests.conftest import PASSWORD, make_user
from tests.support import factories

pytestmark = pytest.mark.browser


def signed_in(browser: Any, path: str, name: str, role: str) -> Any:
    make_user(name, role)
    browser.login(name, PASSWORD)
    return browser.goto(path)


def download_export(page: Any) -> tuple[str, dict[str, Any]]:
    """Click the control by its role and name; the file that arrives, parsed."""
    with page.expect_download() as arrived:
        page.get_by_role("link", name="Export (JSON)").click()
    download = arrived.value
    assert download.failure() is None
    return download.suggested_filename, json.loads(Path(download.path()).read_text())


def test_a_viewer_downloads_a_finished_runs_export(browser, transactional_db):
    run = run_inline("migrate-records", input={"count": 3, "batch_size": 2})
    page = signed_in(browser, f"/runs/{run.id}/", "victor", "viewers")
    expect(page.get_by_role("link", name="Export (JSON)")).to_be_visible()
    browser.check_accessibility("the run page with its export link")
    browser.screenshot("run-export", width=1280)
    browser.screenshot("run-export", width=390)

    name, doc = download_export(page)

    assert name == f"run-{run.id}.json"
    assert (doc["format"], doc["version"], doc["exported_by"]) == (
        "durable-runs.run-export",
        1,
        "user:victor",
    )
    assert doc["run"]["id"] == str(run.id) and doc["run"]["status"] == "succeeded"
    assert doc["counts"]["item_claims"] == 3
    assert problems_of(doc) == []
    # A download: the page stays where it was.
    assert page.url == f"{browser.base_url}/runs/{run.id}/"


def test_an_operator_downloads_the_export_beside_the_runs_operations(browser, transactional_db):
    claim = factories.crashed_merge(change_id=9)
    page = signed_in(browser, f"/runs/{claim.run_id}/", "olivia", "operators")
    expect(page.get_by_role("button", name="Cancel run…")).to_be_visible()
    browser.screenshot("run-export-operator", width=1280)
    browser.screenshot("run-export-operator", width=390)

    name, doc = download_export(page)

    assert name == f"run-{claim.run_id}.json"
    assert doc["run"]["status"] == "needs_reconciliation"
    (exported,) = doc["claims"]
    assert (exported["key"], exported["status"]) == (claim.key, "unresolved")
