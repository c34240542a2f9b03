"""Login, roles and the security headers every page relies on (Django's test client)."""

from __future__ import annotations

import pytest
from django.test import Client

from runs import engine
from runs.models import Run, Step
from tests.conftest import PASSWORD, make_user

PAGES = ["/", "/runs/", "/reconciliation/", "/reconciliation/history/", "/reconciliation/badge/"]


@pytest.fixture
def a_run(db) -> Run:
    return engine.submit_run(workflow="merge-change", input={"change_id": 1})


@pytest.mark.parametrize("path", PAGES)
def test_pages_anonymous_is_sent_to_the_product_login(client, db, path):
    response = client.get(path)
    assert response.status_code == 302
    assert response["Location"] == f"/login/?next={path}"


def test_pages_admin_login_is_the_product_login(client, db):
    response = client.get("/admin/login/?next=/admin/")
    assert (response.status_code, response["Location"]) == (302, "/login/?next=/admin/")


@pytest.mark.parametrize("path", PAGES)
def test_pages_user_without_a_role_is_refused(client, nobody, path):
    client.force_login(nobody)
    response = client.get(path)
    assert response.status_code == 403
    assert b"does not have the role" in response.content


@pytest.mark.parametrize("path", PAGES)
def test_pages_refuse_a_submitter_service_account(client, submitter, path):
    """Submitters use the API (tests/test_api_permissions.py), not the pages."""
    client.force_login(submitter)
    assert client.get(path).status_code == 403


@pytest.mark.parametrize("path", PAGES)
def test_pages_viewer_and_operator_can_read(viewer_client, path, a_run):
    assert viewer_client.get(path).status_code == 200


def test_run_page_for_viewer(viewer_client, a_run):
    response = viewer_client.get(f"/runs/{a_run.id}/")
    assert response.status_code == 200
    assert b"merge-change@1" in response.content


@pytest.mark.parametrize("bad", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_run_page_unknown_run_is_404(viewer_client, db, bad):
    assert viewer_client.get(f"/runs/{bad}/").status_code == 404


def test_login_with_the_right_password_lands_on_next(client, operator):
    response = client.post(
        "/login/", {"username": "olivia", "password": PASSWORD, "next": "/runs/"}
    )
    assert (response.status_code, response["Location"]) == (302, "/runs/")
    assert client.get("/runs/").status_code == 200


def test_login_with_a_wrong_password_says_so_and_logs_nobody_in(client, operator):
    response = client.post("/login/", {"username": "olivia", "password": "nope"})
    assert response.status_code == 200
    assert b"Please enter a correct username and password" in response.content
    assert client.get("/").status_code == 302


def test_login_failures_are_throttled_with_a_clear_message(client, operator, settings):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post("/login/", {"username": "olivia", "password": "nope"})

    locked = client.post("/login/", {"username": "olivia", "password": PASSWORD})

    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content
    assert b"Try again in 15 minutes" in locked.content
    assert client.get("/").status_code == 302  # the right password did not get in either
    make_user("bob", "viewers")
    other = Client()  # another account from the same address is not locked out
    response = other.post("/login/", {"username": "bob", "password": PASSWORD})
    assert response.status_code == 302


def test_logout_is_a_post_and_ends_the_session(operator_client):
    assert operator_client.get("/logout/").status_code == 405
    response = operator_client.post("/logout/")
    assert (response.status_code, response["Location"]) == (302, "/login/")
    assert operator_client.get("/").status_code == 302


def test_pages_send_a_strict_content_security_policy(operator_client):
    csp = operator_client.get("/")["Content-Security-Policy"]
    assert "script-src 'self'" in csp
    assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
    assert "frame-ancestors 'none'" in csp


def test_pages_serve_htmx_from_the_app_not_a_cdn(operator_client):
    html = operator_client.get("/").content.decode()
    assert '<script src="/static/vendor/htmx-2.0.11.min.js"' in html
    assert "://" not in html.split("<body")[0].replace("http://www.w3.org", "")


def test_run_page_escapes_a_hostile_step_result(operator_client, a_run):
    hostile = {"html": "<script>alert(1)</script>"}
    Step.objects.filter(run=a_run).update(result=hostile, error="<img src=x onerror=alert(2)>")
    Run.objects.filter(pk=a_run.id).update(result=hostile)
    html = operator_client.get(f"/runs/{a_run.id}/").content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "<img src=x" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


# --- password length -----------------------------------------------------------------
# Eleven characters, none of the other validators' objections: only the length is at fault.
ELEVEN = "Qv7!mRt2#kZ"


def test_password_change_refuses_fewer_than_12_characters(client, operator):
    """Operators are staff: the admin's own password-change page is theirs to use, and
    it must hold them to the same minimum as createoperator."""
    client.force_login(operator)
    response = client.post(
        "/admin/password_change/",
        {"old_password": PASSWORD, "new_password1": ELEVEN, "new_password2": ELEVEN},
    )

    assert response.status_code == 200  # the form again, with its error
    assert b"at least 12 characters" in response.content
    operator.refresh_from_db()
    assert operator.check_password(PASSWORD)


def test_password_change_accepts_12_characters(client, operator):
    client.force_login(operator)
    twelve = ELEVEN + "x"
    response = client.post(
        "/admin/password_change/",
        {"old_password": PASSWORD, "new_password1": twelve, "new_password2": twelve},
    )

    assert response.status_code == 302
    operator.refresh_from_db()
    assert operator.check_password(twelve)
