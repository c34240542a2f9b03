"""Single sign-on in Chromium, end to end: the live app, a real OpenID Connect provider
(node's oidc-provider, tests/support/oidc.py) and the person between them
(docs/operating.md#single-sign-on)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import expect

from config.settings import authentication_backends
from tests.support import oidc

pytestmark = [pytest.mark.browser, pytest.mark.live]


@pytest.fixture(scope="module")
def provider(tmp_path_factory, live_server) -> Any:
    with oidc.running_provider(tmp_path_factory.mktemp("idp"), [live_server.url]) as running:
        yield running


@pytest.fixture
def idp(provider, settings, transactional_db) -> Any:
    oidc.configure(settings, provider)
    provider.accounts.clear()
    return provider


def sign_in_at_provider(page: Any, login: str) -> None:
    """On the login page: the single sign-on button, then the provider's own form."""
    page.get_by_role("link", name="Sign in with Test IdP").click()
    expect(page.get_by_role("heading", name="Sign in to the test provider")).to_be_visible()
    page.get_by_label("Login").fill(login)
    page.get_by_label("Password").fill("anything")
    page.get_by_role("button", name="Sign in").click()


def admin_link(page: Any) -> Any:
    return page.get_by_role("navigation", name="main").get_by_role("link", name="Admin")


def test_an_operator_signs_in_loses_the_role_at_the_provider_and_signs_out(browser, idp):
    idp.set_account("olivia", ["ops-team", "support", "platform-admins"])
    page = browser.goto("/pauses/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/pauses/$"))
    browser.check_accessibility("the login page with single sign-on")
    browser.screenshot("sso-login", width=390)

    sign_in_at_provider(page, "olivia")

    # Back where they were going, as an operator: the page offers them a pause.
    expect(page).to_have_url(f"{browser.base_url}/pauses/")
    expect(page.get_by_role("banner")).to_contain_text("olivia (operator)")
    expect(page.get_by_role("heading", name="Pause a workflow or a step")).to_be_visible()
    expect(
        page.get_by_role("navigation", name="main").get_by_role("link", name="Admin")
    ).to_be_visible()
    browser.screenshot("sso-operator")

    # Out here and at the provider (its confirmation), then back on our login page.
    page.get_by_role("button", name="Log out").click()
    expect(page.get_by_role("heading", name="Sign out of the test provider?")).to_be_visible()
    page.get_by_role("button", name="Yes, sign me out").click()
    expect(page).to_have_url(f"{browser.base_url}/login/")
    expect(page.get_by_role("link", name="Sign in with Test IdP")).to_be_visible()
    # Back, past the sign-out, to the operator's page: no copy of it was kept
    # (no-store), it is asked for again and answers with the login page.
    page.go_back()
    page.go_back()
    expect(page).to_have_url(f"{browser.base_url}/login/?next=/pauses/")
    expect(page.get_by_role("heading", name="Pause a workflow or a step")).to_have_count(0)

    # The provider takes the operators' and admins' groups away; support stays.
    idp.set_account("olivia", ["support"])
    # The provider asks for the login again: its session ended with ours.
    sign_in_at_provider(page, "olivia")

    expect(page).to_have_url(f"{browser.base_url}/pauses/")
    expect(page.get_by_role("banner")).to_contain_text("olivia (viewer)")
    expect(page.get_by_role("heading", name="Pause a workflow or a step")).to_have_count(0)
    expect(
        page.get_by_role("navigation", name="main").get_by_role("link", name="Admin")
    ).to_have_count(0)
    user = User.objects.get(username="olivia")
    assert set(user.groups.values_list("name", flat=True)) == {"viewers"}
    assert user.is_staff is False


def test_someone_whose_groups_give_no_role_sees_why_and_is_not_signed_in(browser, idp):
    idp.set_account("uma", ["lunch-club", "marketing"])
    browser.allow_status(403)
    page = browser.goto("/login/")

    sign_in_at_provider(page, "uma")

    expect(page.get_by_role("heading", name="Not signed in")).to_be_visible()
    main = page.get_by_role("main")
    expect(main).to_contain_text("none of your groups there gives you a role here")
    groups = page.get_by_role("list", name="The groups it gave")
    expect(groups.get_by_role("listitem")).to_have_text(["lunch-club", "marketing"])
    expect(main).to_contain_text("Ask your administrator")
    expect(page.get_by_role("button", name="Log out")).to_have_count(0)
    browser.check_accessibility("the single sign-on refusal")
    browser.screenshot("sso-refused", width=390)
    assert not User.objects.filter(username="uma").exists()

    page.get_by_role("link", name="Back to the login page").click()
    expect(page).to_have_url(f"{browser.base_url}/login/")
    browser.goto("/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))


def test_with_local_login_off_the_page_offers_single_sign_on_only(browser, idp, settings):
    settings.LOCAL_LOGIN = False
    settings.AUTHENTICATION_BACKENDS = authentication_backends(False)
    idp.set_account("olivia", ["ops-team", "platform-admins"])
    page = browser.goto("/admin/")

    expect(page).to_have_url(re.compile(r"/login/\?next=/admin/$"))
    expect(page.get_by_label("Password")).to_have_count(0)
    browser.check_accessibility("the login page, single sign-on only")
    browser.screenshot("sso-only-login")
    sign_in_at_provider(page, "olivia")

    expect(page).to_have_url(f"{browser.base_url}/admin/")
    expect(page.get_by_role("heading", name="Retention policies and schedules")).to_be_visible()
