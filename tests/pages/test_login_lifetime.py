"""How long a login lasts (an absolute lifetime, and an idle expiry that the pages' own
polling does not renew), and that nothing a signed-in user is shown may be stored by a
cache. The clock is moved in the database and the session, never waited for."""

from __future__ import annotations

import re
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.sessions.models import Session
from django.core import signing
from django.db.models import F
from django.test import Client
from django.utils import timezone

from tests.conftest import PASSWORD
from tests.support.api import token_client

TEMPLATES = Path(__file__).resolve().parents[2] / "templates"
HTMX = {"HTTP_HX_REQUEST": "true", "HTTP_HX_CURRENT_URL": "http://testserver/runs/?status=failed"}
BADGE_POLL = {**HTMX, "HTTP_HX_TRIGGER": "queue-badge", "HTTP_HX_TARGET": "queue-badge"}


@pytest.fixture
def signed_in(operator) -> Client:
    """Logged in through the login page, as a person is."""
    client = Client()
    response = client.post("/login/", {"username": "olivia", "password": PASSWORD})
    assert response.status_code == 302
    return client


def session_key(client: Client) -> str:
    return client.cookies[settings.SESSION_COOKIE_NAME].value


def idle(client: Client, **elapsed: float) -> None:
    """As if the person's last request (and the login) were `elapsed` earlier: the login
    time in the session, and the signed time of the activity cookie (runs/pages/sessions.py)."""
    back = int(timedelta(**elapsed).total_seconds())
    session = client.session
    session["login_at"] = int(session.get("login_at", time.time())) - back
    session.save()
    cookie = client.cookies.get("last_activity")
    if cookie is not None and cookie.value:
        signer = signing.get_cookie_signer(salt=f"last_activity:{session.session_key}")
        at = int(signer.unsign(cookie.value)) - back
        client.cookies["last_activity"] = signer.sign(str(at))


def test_a_login_ends_after_its_absolute_lifetime_however_busy(signed_in):
    assert signed_in.get("/").status_code == 200
    Session.objects.filter(pk=session_key(signed_in)).update(
        expire_date=F("expire_date") - timedelta(hours=12, minutes=1)
    )

    response = signed_in.get("/runs/")

    assert (response.status_code, response.get("Location")) == (302, "/login/?next=/runs/")


def test_a_login_lasts_its_absolute_lifetime_and_no_more(signed_in):
    remaining = Session.objects.get(pk=session_key(signed_in)).expire_date - timezone.now()
    assert timedelta(hours=11, minutes=59) < remaining <= timedelta(hours=12)
    assert int(signed_in.cookies[settings.SESSION_COOKIE_NAME]["max-age"]) <= 12 * 3600


def test_an_idle_session_ends(signed_in):
    idle(signed_in, minutes=31)

    response = signed_in.get("/runs/")

    assert (response.status_code, response.get("Location")) == (302, "/login/?next=/runs/")
    assert signed_in.get("/").status_code == 302  # ended, not just refused once
    page = signed_in.get("/login/")
    assert b"signed out after 30 minutes without activity" in page.content


def test_activity_keeps_a_session_alive(signed_in):
    idle(signed_in, minutes=29)
    assert signed_in.get("/runs/").status_code == 200
    idle(signed_in, minutes=29)
    assert signed_in.get("/").status_code == 200


@pytest.mark.parametrize(
    ("path", "trigger"),
    [
        ("/reconciliation/badge/", "queue-badge"),
        ("/", "overview-live"),
        ("/workers/", "workers-live"),
    ],
)
def test_the_pages_own_polling_does_not_keep_a_session_alive(signed_in, path, trigger):
    idle(signed_in, minutes=29)
    poll = {**HTMX, "HTTP_HX_TRIGGER": trigger, "HTTP_HX_TARGET": trigger}
    assert signed_in.get(path, **poll).status_code == 200
    idle(signed_in, minutes=2)

    response = signed_in.get("/runs/")

    assert (response.status_code, response.get("Location")) == (302, "/login/?next=/runs/")


def test_a_poll_after_the_session_ended_sends_the_whole_page_to_the_login(signed_in):
    """Not the login form swapped into the badge: htmx follows HX-Redirect."""
    idle(signed_in, minutes=31)

    response = signed_in.get("/reconciliation/badge/", **BADGE_POLL)

    assert response["HX-Redirect"] == "/login/?next=/runs/%3Fstatus%3Dfailed"
    assert b"<form" not in response.content


def test_every_polling_element_is_known_as_a_poll():
    """A new `data-poll` element must be added to runs/pages/sessions.py's POLL_ELEMENTS, or its
    polling would keep every open tab signed in."""
    from runs.pages.sessions import POLL_ELEMENTS

    found = set()
    for template in TEMPLATES.rglob("*.html"):
        for tag in re.findall(r"<[^>]*\bdata-poll\b[^>]*>", template.read_text()):
            element = re.search(r'\bid="([^"]+)"', tag)
            assert element, f"{template}: a data-poll element needs an id: {tag[:80]}"
            found.add(element.group(1))
    assert found and found <= POLL_ELEMENTS, found - POLL_ELEMENTS


# --- caching -------------------------------------------------------------------------
def cache_control(response) -> set[str]:
    return {part.strip() for part in response.get("Cache-Control", "").split(",") if part}


@pytest.mark.parametrize("path", ["/", "/runs/", "/reconciliation/", "/api/runs/"])
def test_pages_and_api_answers_to_a_signed_in_user_are_never_stored(signed_in, path):
    assert {"no-store", "private"} <= cache_control(signed_in.get(path))


def test_api_answers_to_a_token_are_never_stored(operator):
    response = token_client(operator).get("/api/runs/")
    assert response.status_code == 200
    assert {"no-store", "private"} <= cache_control(response)


def test_static_files_stay_cacheable_for_a_signed_in_user(signed_in):
    response = signed_in.get("/static/app.js")
    assert response.status_code == 200
    assert "no-store" not in cache_control(response)
