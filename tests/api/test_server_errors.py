"""An unexpected exception under /api/ (docs/api.md#pagination-and-errors) answers 500
in the API's error shape, code `server_error`, through Django's whole request handling
with DEBUG off (handler500, api/errors.py): never Django's HTML page, and never the
exception's text. The pages keep Django's own 500 page."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client

from runs import engine
from tests.support.api import api_token, error_of


class Unexpected(Exception):
    """Nothing maps it: it is a bug, as far as the server knows."""


def broken(*args, **kwargs):
    raise Unexpected("secret detail of the failure")


@pytest.fixture
def raw_client():
    """The test client, with exceptions answered as a server answers them (the default
    re-raises them in the test instead)."""
    assert settings.DEBUG is False
    return Client(raise_request_exception=False)


def test_an_exception_in_an_api_view_is_a_json_500(raw_client, operator, monkeypatch):
    run = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    monkeypatch.setattr("api.views.run_detail", broken)

    response = raw_client.get(
        f"/api/runs/{run.id}/", HTTP_AUTHORIZATION=f"Token {api_token(operator)}"
    )

    error = error_of(response, 500, "server_error")
    assert error == {
        "code": "server_error",
        "message": "the server failed to answer this request; it is logged (nothing here says "
        "whether the request took effect: read the resource again before retrying)",
    }
    assert b"secret detail" not in response.content


def test_an_exception_before_any_view_is_a_json_500_too(raw_client, operator, monkeypatch):
    """Raised while authenticating, before DRF's view runs its exception handler."""
    monkeypatch.setattr("api.authentication.TokenAuthentication.authenticate", broken)

    response = raw_client.get("/api/runs/", HTTP_AUTHORIZATION=f"Token {api_token(operator)}")

    error_of(response, 500, "server_error")


def test_the_pages_keep_djangos_500_page(raw_client, operator, monkeypatch):
    raw_client.force_login(operator)
    run = engine.submit_run(workflow="merge-change", input={"change_id": 1})
    monkeypatch.setattr("runs.web.views.parse_run_id", broken)

    response = raw_client.get(f"/runs/{run.id}/")

    assert response.status_code == 500
    assert response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("digits", [201, 4300])
def test_an_int_search_field_over_200_digits_is_refused_not_a_500(raw_client, operator, digits):
    """A fuzzer's finding: its cause (RunSearchKey.value is 200 characters) is refused
    with the input's other problems, naming the field and the bound."""
    body = '{"workflow": "merge-change", "input": {"change_id": 1%s}}' % ("0" * (digits - 1))

    response = raw_client.post(
        "/api/runs/",
        body,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Token {api_token(operator)}",
    )

    error = error_of(response, 400, "invalid_input")
    assert error["fields"] == {
        "input": [
            "field 'change_id' is a search field, so its text must be at most 200 characters "
            f"(from -(10**199 - 1) to 10**200 - 1); got {digits}"
        ]
    }
