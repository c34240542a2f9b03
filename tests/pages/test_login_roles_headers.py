"""Login, roles and the security headers every page relies on (Django's test client)."""

from __future__ import annotations

import io
import logging

import pytest
from django.core.management import call_command
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


def test_admin_sends_an_anonymous_visitor_to_the_login_page_once(client, db):
    response = client.get("/admin/", follow=True)
    assert response.status_code == 200
    assert response.redirect_chain == [("/login/?next=/admin/", 302)]
    assert b'name="password"' in response.content


@pytest.mark.parametrize("path", ["/admin/", "/admin/runs/schedule/", "/admin/login/?next=/admin/"])
def test_admin_tells_a_signed_in_non_staff_user_why_not_instead_of_looping(viewer_client, path):
    response = viewer_client.get(path, follow=True)

    assert response.status_code == 403
    html = response.content.decode()
    assert "You are signed in as <strong>victor</strong>" in html
    assert "staff and operators" in html and "retention policies and schedules" in html
    assert "ask an administrator" in html
    assert '<a href="/">Back to the dashboard</a>' in html


@pytest.mark.parametrize("path", PAGES)
def test_pages_user_without_a_role_is_refused(client, nobody, path):
    client.force_login(nobody)
    response = client.get(path)
    assert response.status_code == 403
    assert b"does not have the role" in response.content


@pytest.mark.parametrize("path", PAGES)
def test_pages_refuse_a_submitter_service_account(client, submitter, path):
    """Submitters use the API (tests/api/test_permissions.py), not the pages."""
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


# --- failed logins behind a proxy: the pair and the address, never the username alone ---
PROXY = "10.0.0.2"  # the TLS proxy in front: REMOTE_ADDR of every request


def login_via_proxy(client: Client, username: str, password: str, address: str, spoofed: str = ""):
    """A login the proxy forwards: it appends the address it saw to X-Forwarded-For (after
    whatever the client itself sent)."""
    forwarded = f"{spoofed}, {address}" if spoofed else address
    return client.post(
        "/login/",
        {"username": username, "password": password},
        REMOTE_ADDR=PROXY,
        HTTP_X_FORWARDED_FOR=forwarded,
    )


@pytest.fixture
def oscar(db):
    return make_user("oscar", "operators")


@pytest.fixture
def behind_one_proxy(settings):
    settings.TRUSTED_PROXY_COUNT = 1


def test_login_lockout_of_one_address_leaves_the_operator_in_from_another(
    oscar, behind_one_proxy, settings
):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        login_via_proxy(Client(), "oscar", "nope", "203.0.113.66")

    # The attacker's address is locked out for oscar, whatever it puts in front.
    locked = login_via_proxy(Client(), "oscar", PASSWORD, "203.0.113.66", spoofed="192.0.2.9")
    assert locked.status_code == 429
    # Oscar himself, from his own address through the same proxy, logs in.
    response = login_via_proxy(Client(), "oscar", PASSWORD, "198.51.100.23")
    assert (response.status_code, response.get("Location")) == (302, "/")


def test_login_without_a_proxy_configured_ignores_x_forwarded_for(oscar, settings):
    """A client facing the service directly cannot pick a fresh address per guess."""
    assert settings.TRUSTED_PROXY_COUNT == 0
    for n in range(settings.AXES_FAILURE_LIMIT):
        Client().post(
            "/login/",
            {"username": "oscar", "password": "nope"},
            REMOTE_ADDR="203.0.113.66",
            HTTP_X_FORWARDED_FOR=f"192.0.2.{n}",
        )
    locked = Client().post(
        "/login/",
        {"username": "oscar", "password": PASSWORD},
        REMOTE_ADDR="203.0.113.66",
        HTTP_X_FORWARDED_FOR="192.0.2.200",
    )
    assert locked.status_code == 429


def test_login_guesses_across_many_usernames_from_one_address_are_limited(
    oscar, behind_one_proxy, settings
):
    settings.AXES_ADDRESS_FAILURE_LIMIT = 8
    make_user("mallory", "viewers")  # the attacker has an account of her own
    attacker = "203.0.113.66"
    for n in range(settings.AXES_ADDRESS_FAILURE_LIMIT - 1):
        assert login_via_proxy(Client(), f"user{n}", "guess", attacker).status_code == 200
    # Her own successful login resets her own pair, not the address's count.
    assert login_via_proxy(Client(), "mallory", PASSWORD, attacker).status_code == 302
    assert login_via_proxy(Client(), "another", "guess", attacker).status_code == 429

    locked = login_via_proxy(Client(), "oscar", PASSWORD, attacker)
    assert locked.status_code == 429
    assert b"Logins from your address are paused after 8 failed attempts" in locked.content
    # Everyone else is unaffected.
    assert login_via_proxy(Client(), "oscar", PASSWORD, "198.51.100.23").status_code == 302


def test_failed_login_log_names_the_address_and_a_hash_of_the_username(
    oscar, behind_one_proxy, caplog
):
    import json

    from config.logs import ContextFilter, JsonFormatter

    caplog.set_level(logging.INFO)
    login_via_proxy(Client(), "oscar", "nope", "203.0.113.66", spoofed="192.0.2.9")
    login_via_proxy(Client(), "oscar", "nope again", "203.0.113.66")
    login_via_proxy(Client(), "olga", "nope", "203.0.113.66")

    failed = [r for r in caplog.records if hasattr(r, "username_hash")]
    assert [r.client_ip for r in failed] == ["203.0.113.66"] * 3
    first, second, other = (r.username_hash for r in failed)
    assert first == second != other and len(first) >= 12
    ContextFilter().filter(failed[0])
    entry = json.loads(JsonFormatter().format(failed[0]))
    assert (entry["client_ip"], entry["username_hash"]) == ("203.0.113.66", first)
    assert "203.0.113.66" in entry["message"] and first in entry["message"]
    # No line anywhere names the username or hides the address behind a mask.
    assert "oscar" not in caplog.text and "olga" not in caplog.text
    assert "****" not in caplog.text
    # An administrator finds the lines of a suspect name by its hash.
    out = io.StringIO()
    call_command("username_hash", "oscar", stdout=out)
    assert out.getvalue() == f"{first}  oscar\n"
