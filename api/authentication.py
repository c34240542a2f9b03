"""API tokens, `Authorization: Token <key>`, by django-rest-knox: only a hash of each
token is stored, each expires (API_TOKEN_TTL_DAYS, fixed when it is made), a user may
hold several, and `manage.py createoperator` makes, rotates and revokes them (it is the
only way to get one: there is no login endpoint that trades a password for a token).

Knox's header parsing, user check and 401 scheme are kept; its credential check is
replaced, because:
- it deletes an expired token the first time it is presented and answers "Invalid
  token." then and from then on, so a client is never told that its token expired;
- it decodes the token as UTF-8 unguarded: a header byte outside UTF-8 was a 500.
Looking the token up by its digest (knox's primary key) is also one query, where knox
filters on the token's first characters and lists all of the user's tokens each time.

The user is named in the request's log context as soon as the token is checked: the
context (config/requestlog.py) is bound before any view runs, when only a session's user
is known, and without this the lines the view writes would name nobody.
"""

from __future__ import annotations

from datetime import UTC
from typing import Any

from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import build_bearer_security_scheme_object
from knox.auth import TokenAuthentication as KnoxTokenAuthentication
from knox.crypto import hash_token
from knox.models import get_token_model
from rest_framework.exceptions import AuthenticationFailed

from runs.ops.logcontext import bind

# Knox's (and DRF's) words for a token that matches none: clients may already test them.
INVALID = "Invalid token."


def expired_message(expiry: Any) -> str:
    return (
        f"the token expired at {expiry.astimezone(UTC):%Y-%m-%d %H:%M} UTC; ask an operator "
        "for a new one (manage.py createoperator NAME --rotate-token)"
    )


class TokenAuthentication(KnoxTokenAuthentication):
    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        result: tuple[Any, Any] | None = super().authenticate(request)
        if result is not None:
            bind(user=result[0].get_username())
        return result

    def authenticate_credentials(self, token: bytes) -> tuple[Any, Any]:
        try:
            key = token.decode("utf-8")
        except UnicodeDecodeError:
            raise AuthenticationFailed(INVALID) from None
        row = (
            get_token_model().objects.select_related("user").filter(digest=hash_token(key)).first()
        )
        if row is None:
            raise AuthenticationFailed(INVALID)
        # Kept, not deleted: the same token presented again is told the same.
        # `createoperator NAME --rotate-token | --revoke-tokens` removes it.
        if row.expiry is not None and row.expiry <= timezone.now():
            raise AuthenticationFailed(expired_message(row.expiry))
        user_and_token: tuple[Any, Any] = self.validate_user(row)
        return user_and_token


class TokenScheme(OpenApiAuthenticationExtension):
    """The OpenAPI security scheme of the class above (drf-spectacular's own extension for
    knox matches knox's class only), under the name DRF's token scheme had."""

    target_class = "api.authentication.TokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        scheme = build_bearer_security_scheme_object(
            header_name="Authorization", token_prefix=self.target.authenticate_header(None)
        )
        scheme["description"] = (
            "`Authorization: Token <key>`, with a token from `manage.py createoperator NAME "
            "--token`; it expires after API_TOKEN_TTL_DAYS (90 days by default)."
        )
        return scheme
