"""Helpers for the REST API tests: clients authenticated the way scripts are (a token),
the one error shape, and counts of everything a refused request must not write."""

from __future__ import annotations

from typing import Any

from knox.models import AuthToken
from rest_framework.test import APIClient

from reconciliation.models import ClaimTake
from runs.models import Attempt, Claim, Event, Pause, PauseChange, Run, Step, SubmissionKey


def api_token(user: Any) -> str:
    """A new key `user` sends as `Authorization: Token <key>` (as `createoperator NAME
    --token` makes one). The one place tests make API tokens."""
    _, key = AuthToken.objects.create(user=user)
    return str(key)


def token_client(user: Any | None) -> APIClient:
    """A client sending `Authorization: Token …` for `user` (anonymous for None), with a
    new token of the user's (as `createoperator NAME --token` makes one)."""
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
        for model in (
            Run,
            Step,
            Attempt,
            Claim,
            Event,
            SubmissionKey,
            ClaimTake,
            Pause,
            PauseChange,
        )
    }
