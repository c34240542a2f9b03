"""DRF's token authentication, naming the user in the request's log context as soon
as it is known.

The request's context (config/requestlog.py) is bound before any view runs, when only
a session's user is known; DRF authenticates a token inside the view, so without this
the lines written by the view would name nobody.
"""

from __future__ import annotations

from typing import Any

from rest_framework import authentication

from runs.logcontext import bind


class TokenAuthentication(authentication.TokenAuthentication):
    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        result: tuple[Any, Any] | None = super().authenticate(request)
        if result is not None:
            bind(user=result[0].get_username())
        return result
