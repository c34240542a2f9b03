"""The interactive API docs in a real browser: Swagger UI from our own static files
under the site's strict Content-Security-Policy (a CSP violation is a console error,
which fails the test), and "Try it out" submitting a run with the session's CSRF token."""

from __future__ import annotations

import pytest

from runs.models import Run
from tests.conftest import PASSWORD, make_user

pytestmark = pytest.mark.browser


def test_api_docs_render_without_cdn_or_csp_violation_and_submit(browser, transactional_db):
    make_user("olivia", "operators")
    browser.login("olivia", PASSWORD)
    page = browser.page
    outside: list[str] = []
    page.on(
        "request",
        lambda r: outside.append(r.url) if not r.url.startswith(browser.base_url) else None,
    )

    response = page.goto(browser.base_url + "/api/docs/")
    assert response is not None
    csp = response.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "unsafe" not in csp
    page.get_by_text("Submit a run").first.wait_for()
    # Every operation the schema declares is on the page (22 as of the pauses, batches
    # and the export; 13 before them).
    declared = [
        operation
        for item in page.request.get(browser.base_url + "/api/schema/?format=json")
        .json()["paths"]
        .values()
        for operation in item
        if operation in {"get", "post", "put", "patch", "delete"}
    ]
    assert len(declared) == 22
    assert page.locator(".opblock").count() == len(declared)
    browser.screenshot("api-docs")

    page.get_by_text("Submit a run").first.click()
    page.get_by_role("button", name="Try it out").click()
    body = page.locator(".body-param__text")
    body.fill('{"workflow": "merge-change", "input": {"change_id": 5}}')
    page.get_by_role("button", name="Execute").click()
    page.locator(".live-responses-table tbody .response-col_status").first.wait_for()
    status = page.locator(".live-responses-table tbody .response-col_status").first.inner_text()

    assert status.strip() == "201"
    assert Run.objects.get().input == {"change_id": 5}
    assert outside == []
    browser.screenshot("api-docs-submitted")
