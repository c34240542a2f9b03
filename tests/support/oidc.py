"""A real OpenID Connect provider for the single sign-on tests: node's oidc-provider
(package.json), run by tests/support/oidc_provider.mjs as a process of its own on a free
port. Never a mock: the app reads its discovery document, is sent to its login page,
exchanges a real code for a real signed ID token and fetches its keys.

Without node or node_modules/oidc-provider (`make install` runs npm ci) the tests that
need it are skipped with one line saying so; with CI set that is a failure, as for
Chromium (tests/browser/conftest.py).

A test says who exists at the provider and in which groups with `set_account`; the
provider reads its accounts file at each sign-in, so a group removed there is gone at
the person's next sign-in, as at a real provider.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urljoin, urlsplit

import pytest
import requests

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = Path(__file__).with_name("oidc_provider.mjs")
PACKAGE = ROOT / "node_modules" / "oidc-provider"
CLIENT_ID = "durable-runs"
CLIENT_SECRET = "a test client secret, long enough"
# Another application registered at the same provider: its tokens are not for us.
OTHER_CLIENT_ID = "another-app"
OTHER_REDIRECT = "http://another-app.invalid/callback"


def missing(message: str) -> NoReturn:
    """Skipped on a newcomer's machine; a failure with CI set."""
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def require(program: str, message: str) -> str:
    found = shutil.which(program)
    if found is None:
        missing(message)
    return found


def require_node() -> str:
    message = (
        "node or node_modules/oidc-provider not found: install node and run `make install` "
        "(npm ci) to run the single sign-on tests"
    )
    node = require("node", message)
    if not PACKAGE.exists():
        missing(message)
    return node


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Provider:
    def __init__(
        self,
        directory: Path,
        app_urls: list[str],
        *,
        offset: str | None = None,
        id_token_ttl: int | None = None,
    ):
        self.directory = directory
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.accounts_path = directory / "accounts.json"
        self.accounts: dict[str, dict[str, Any]] = {}
        self._write_accounts()
        config = {
            "port": self.port,
            "issuer": self.issuer,
            "accounts": str(self.accounts_path),
            "id_token_ttl": id_token_ttl,
            "clients": [
                {
                    "client_id": CLIENT_ID,
                    "client_secret": CLIENT_SECRET,
                    "redirect_uris": [f"{u}/oidc/callback/" for u in app_urls],
                    "post_logout_redirect_uris": [f"{u}/login/" for u in app_urls],
                },
                {
                    "client_id": OTHER_CLIENT_ID,
                    "client_secret": CLIENT_SECRET,
                    "redirect_uris": [OTHER_REDIRECT],
                },
            ],
        }
        config_path = directory / "provider.json"
        config_path.write_text(json.dumps(config))
        command = [require_node(), str(SCRIPT), str(config_path)]
        if offset is not None:
            require("faketime", "faketime not found: `apt-get install faketime` to run it")
            # The provider's clock runs `offset` from ours (libfaketime), so the tokens it
            # signs are dated then: with "-10m" and a 60 s id_token_ttl, an ID token that
            # expired nine minutes ago (its cookies, an hour long, still live).
            command = ["faketime", "-f", offset, *command]
        self.log = (directory / "provider.log").open("w")
        self.process = subprocess.Popen(
            command, cwd=ROOT, stdout=subprocess.PIPE, stderr=self.log, text=True
        )
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self.process.stdout is not None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.stdout], [], [], 0.2)
            if ready:
                line = self.process.stdout.readline()
                if line.startswith("ready "):
                    return
            if self.process.poll() is not None:
                break
        self.stop()
        raise AssertionError(
            "the OIDC provider did not start: " + (self.directory / "provider.log").read_text()
        )

    def _write_accounts(self) -> None:
        # Replaced whole (rename), so the provider never reads half a file.
        partial = self.accounts_path.with_suffix(".partial")
        partial.write_text(json.dumps(self.accounts))
        partial.replace(self.accounts_path)

    def set_account(
        self,
        login: str,
        groups: list[str],
        *,
        sub: str | None = None,
        username: str | None = None,
        **claims: Any,
    ) -> None:
        """Someone who can sign in at the provider as `login` (any password)."""
        previous = self.accounts.get(login, {})
        self.accounts[login] = {
            "sub": sub or previous.get("sub") or f"sub-{login}",
            "claims": {
                "preferred_username": username if username is not None else login,
                "email": f"{login}@example.com",
                "email_verified": True,
                "name": login.title(),
                "groups": groups,
                **claims,
            },
        }
        self._write_accounts()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


@contextmanager
def running_provider(
    directory: Path,
    app_urls: list[str],
    *,
    offset: str | None = None,
    id_token_ttl: int | None = None,
) -> Iterator[Provider]:
    provider = Provider(directory, app_urls, offset=offset, id_token_ttl=id_token_ttl)
    try:
        yield provider
    finally:
        provider.stop()


def configure(settings: Any, provider: Provider, **overrides: Any) -> None:
    """The app's settings (pytest-django's `settings` fixture) for this provider."""
    settings.OIDC_ISSUER = provider.issuer
    settings.OIDC_CLIENT_ID = CLIENT_ID
    settings.OIDC_CLIENT_SECRET = CLIENT_SECRET
    settings.OIDC_ROLE_GROUPS = (
        "operators=ops-team,viewers=support,submitters=ci-bots,staff=platform-admins"
    )
    settings.OIDC_PROVIDER_NAME = "Test IdP"
    for name, value in overrides.items():
        setattr(settings, name, value)


def login_at_provider(start: str, login: str, app_url: str) -> str:
    """Follow the provider's side of a sign-in that the app sent to `start` (the
    authorization request), log in as `login` on its form, and return the address the
    provider sends the browser back to (on `app_url`)."""
    http = requests.Session()
    answer = http.get(start, allow_redirects=False, timeout=10)
    assert answer.status_code in (302, 303), answer.text
    interaction = urljoin(start, answer.headers["location"])
    assert urlsplit(interaction).path.startswith("/interaction/"), interaction
    answer = http.post(
        interaction, data={"login": login, "password": "anything"}, allow_redirects=False
    )
    for _ in range(5):
        assert answer.status_code in (302, 303), answer.text
        location = urljoin(interaction, answer.headers["location"])
        if location.startswith(app_url):
            return location
        answer = http.get(location, allow_redirects=False, timeout=10)
    raise AssertionError(f"the provider never sent back to {app_url}")


def token_for_other_client(provider: Provider, login: str, nonce: str) -> str:
    """A real ID token the provider issued to another application (OTHER_CLIENT_ID),
    by the code flow that application would run."""
    import base64
    import hashlib
    from urllib.parse import parse_qs, urlencode

    verifier = "v" * 64
    challenge = (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    )
    params = {
        "client_id": OTHER_CLIENT_ID,
        "response_type": "code",
        "scope": "openid profile groups",
        "redirect_uri": OTHER_REDIRECT,
        "state": "s" * 16,
        "nonce": nonce,
        "code_challenge": challenge,
        "code_challenge_method": "S256",
    }
    back = login_at_provider(f"{provider.issuer}/auth?{urlencode(params)}", login, OTHER_REDIRECT)
    code = parse_qs(urlsplit(back).query)["code"][0]
    answer = requests.post(
        f"{provider.issuer}/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": OTHER_REDIRECT,
            "code_verifier": verifier,
        },
        auth=(OTHER_CLIENT_ID, CLIENT_SECRET),
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return str(answer.json()["id_token"])
