"""Helpers for the REST API tests: clients authenticated the way scripts are (a token),
the one error shape, and counts of everything a refused request must not write."""

from __future__ import annotations

from typing import Any

from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from reconciliation.models import ClaimTake
from runs.models import Attempt, Claim, Event, Run, Step, SubmissionKey


def api_token(user: Any) -> str:
    """The key `user` sends as `Authorization: Token <key>`. The one place tests make
    API tokens: how a token is issued and stored may change, what is sent does not."""
    return str(Token.objects.get_or_create(user=user)[0].key)


def token_client(user: Any | None) -> APIClient:
    """A client sending `Authorization: Token …` for `user` (anonymous for None)."""
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {api_token(user)}")
    return client


def error_of(response: Any, status: int, code: str) -> dict[str, Any]:
    """The response is `status` with exactly the error shape and `code`; its body."""
    assert response.status_code == status, (response.status_code, response.content[:500])
    assert response["Content-Type"] == "application/json"
    body = response.json()
    assert list(body) == ["error"]
    error = body["error"]
    assert set(error) <= {"code", "message", "fields"}
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]
    if "fields" in error:
        assert all(isinstance(v, list) and v for v in error["fields"].values())
    return error


def written() -> dict[str, int]:
    """Rows of every table a request could write: equal before and after a refusal."""
    return {
        model.__name__: model.objects.count()
        for model in (Run, Step, Attempt, Claim, Event, SubmissionKey, ClaimTake)
    }
