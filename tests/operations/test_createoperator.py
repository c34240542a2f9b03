"""`createoperator NAME [--token]`: the password comes from OPERATOR_PASSWORD or a prompt,
never the command line, and is checked by Django's password validators. API tokens through
requests: tests/api/test_tokens.py."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import User
from django.core.management import CommandError, call_command
from knox.models import AuthToken

from tests.support import places

ROOT = Path(__file__).resolve().parents[2]
GOOD = "correct horse battery"
OLD = "an old passphrase 7"


class Terminal(io.StringIO):
    """Stands in for stdin when a person sits at a terminal."""

    def isatty(self) -> bool:
        return True


class Pipe(io.StringIO):
    def isatty(self) -> bool:
        return False


@pytest.fixture
def no_password_variable(monkeypatch):
    monkeypatch.delenv("OPERATOR_PASSWORD", raising=False)


@pytest.fixture
def prompts(monkeypatch, no_password_variable):
    """Answers for getpass, in order; the list records the questions asked."""
    asked: list[str] = []
    answers: list[str] = []

    def fake_getpass(prompt: str = "Password: ", stream: object = None) -> str:
        asked.append(prompt)
        return answers.pop(0)

    monkeypatch.setattr("getpass.getpass", fake_getpass)
    return answers, asked


def createoperator(*args: str, stdin: io.StringIO | None = None) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("createoperator", *args, stdin=stdin or Pipe(), stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def existing_operator(password: str = OLD) -> User:
    return User.objects.create_user("alice", password=password, is_staff=True)


def test_createoperator_sets_password_from_environment(db, monkeypatch):
    monkeypatch.setenv("OPERATOR_PASSWORD", GOOD)

    out, err = createoperator("alice")

    user = User.objects.get(username="alice")
    assert user.check_password(GOOD)
    assert (user.is_staff, user.is_superuser) == (True, False)
    assert list(user.groups.values_list("name", flat=True)) == ["operators"]
    assert (out, err) == ("", "created operator alice\n")


def test_createoperator_refuses_weak_password_one_line_per_problem(db, monkeypatch):
    monkeypatch.setenv("OPERATOR_PASSWORD", "12345678")

    with pytest.raises(CommandError) as refused:
        createoperator("alice")

    assert str(refused.value).splitlines() == [
        "password refused: This password is too short. It must contain at least 12 characters.",
        "password refused: This password is too common.",
        "password refused: This password is entirely numeric.",
    ]
    assert not User.objects.filter(username="alice").exists()


def test_createoperator_refused_password_changes_nothing(db, monkeypatch):
    user = existing_operator()
    monkeypatch.setenv("OPERATOR_PASSWORD", "alice123")

    with pytest.raises(CommandError) as refused:
        createoperator("alice")

    assert str(refused.value).splitlines() == [
        "password refused: The password is too similar to the username.",
        "password refused: This password is too short. It must contain at least 12 characters.",
        "password refused: This password is too common.",
    ]
    user.refresh_from_db()
    assert user.check_password(OLD)
    assert (user.is_superuser, user.groups.count()) == (False, 0)


def test_createoperator_refused_password_makes_no_account_and_no_token(db, monkeypatch):
    monkeypatch.setenv("OPERATOR_PASSWORD", "bob123")

    with pytest.raises(CommandError, match=r"^password refused: "):
        createoperator("bob", "--token")

    assert (User.objects.filter(username="bob").count(), AuthToken.objects.count()) == (0, 0)


def test_createoperator_short_password_exits_1_with_one_line(transactional_db, tmp_path):
    """The whole command line, as an operator runs it."""
    env = {
        **os.environ,
        "DATABASE_URL": places.database_url_for_tests(),
        "DURABLE_RUNS_VAR": str(tmp_path),
        "OPERATOR_PASSWORD": "x7Kq",
    }

    result = subprocess.run(
        [sys.executable, "manage.py", "createoperator", "alice"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "CommandError: password refused: "
        "This password is too short. It must contain at least 12 characters.\n"
    )
    assert not User.objects.filter(username="alice").exists()


def test_createoperator_refuses_11_characters_in_one_line(db, monkeypatch):
    """Eleven characters that no other validator objects to: the length alone is at fault."""
    monkeypatch.setenv("OPERATOR_PASSWORD", "Qv7!mRt2#kZ")

    with pytest.raises(CommandError) as refused:
        createoperator("alice")

    assert str(refused.value) == (
        "password refused: This password is too short. It must contain at least 12 characters."
    )
    assert not User.objects.filter(username="alice").exists()


def test_createoperator_token_options_as_an_operator_runs_them(transactional_db, tmp_path):
    """The whole command line: the token alone on stdout; a refusal is one line."""
    env = {
        **os.environ,
        "DATABASE_URL": places.database_url_for_tests(),
        "DURABLE_RUNS_VAR": str(tmp_path),
    }
    env.pop("OPERATOR_PASSWORD", None)

    def manage(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "manage.py", "createoperator", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    made = manage("ci-bot", "--submitter", "--token")
    refused = manage("ci-bots", "--revoke-tokens")

    assert made.returncode == 0, made.stderr
    assert len(made.stdout) == 65 and made.stdout.endswith("\n")
    assert "new API token for ci-bot, valid until " in made.stderr
    assert (refused.returncode, refused.stdout) == (1, "")
    assert refused.stderr == (
        "CommandError: no account named ci-bots: --revoke-tokens needs an existing one\n"
    )


def test_createoperator_prompts_twice_on_a_terminal(db, prompts):
    answers, asked = prompts
    answers[:] = [GOOD, GOOD]

    createoperator("alice", stdin=Terminal())

    assert asked == ["Password for alice: ", "Password for alice (again): "]
    assert User.objects.get(username="alice").check_password(GOOD)


def test_createoperator_prompt_mismatch_changes_nothing(db, prompts):
    user = existing_operator()
    answers, _ = prompts
    answers[:] = [GOOD, GOOD + "!"]

    with pytest.raises(CommandError, match=r"^the two passwords differ; nothing changed$"):
        createoperator("alice", stdin=Terminal())

    user.refresh_from_db()
    assert user.check_password(OLD)
    assert user.groups.count() == 0


def test_createoperator_prompted_password_is_validated(db, prompts):
    answers, _ = prompts
    answers[:] = ["short", "short"]

    with pytest.raises(CommandError) as refused:
        createoperator("alice", stdin=Terminal())

    assert str(refused.value).splitlines() == [
        "password refused: This password is too short. It must contain at least 12 characters.",
    ]
    assert not User.objects.filter(username="alice").exists()


def test_createoperator_environment_wins_over_the_prompt(db, prompts, monkeypatch):
    _, asked = prompts
    monkeypatch.setenv("OPERATOR_PASSWORD", GOOD)

    createoperator("alice", stdin=Terminal())

    assert asked == []
    assert User.objects.get(username="alice").check_password(GOOD)


def test_createoperator_without_terminal_or_variable_new_user_has_no_password(
    db, no_password_variable
):
    out, err = createoperator("alice")

    user = User.objects.get(username="alice")
    assert not user.has_usable_password()
    assert out == ""
    assert err.splitlines() == [
        "created operator alice",
        "alice has no password: run `python manage.py createoperator alice` in a terminal "
        "to be asked for one, or set OPERATOR_PASSWORD",
    ]


def test_createoperator_without_terminal_or_variable_keeps_existing_password(
    db, no_password_variable
):
    user = existing_operator()

    out, err = createoperator("alice")

    user.refresh_from_db()
    assert user.check_password(OLD)
    assert (user.is_staff, user.is_superuser) == (True, False)
    assert (out, err) == ("", "updated operator alice (password unchanged)\n")


def test_createoperator_token_is_printed_once_and_each_time_a_new_one(db, monkeypatch):
    """Only a token's hash is stored: the command cannot print an existing one."""
    monkeypatch.setenv("OPERATOR_PASSWORD", GOOD)

    first, _ = createoperator("alice", "--token")
    again, _ = createoperator("alice", "--token")

    assert first != again
    assert all(len(out) == 65 and out.endswith("\n") for out in (first, again))
    assert AuthToken.objects.filter(user__username="alice").count() == 2


def test_createoperator_has_no_password_option(db, monkeypatch):
    """A password on the command line is visible to every user through `ps`."""
    monkeypatch.setenv("OPERATOR_PASSWORD", GOOD)

    with pytest.raises(CommandError, match="unrecognized arguments: --password"):
        createoperator("alice", "--password", GOOD)

    assert not User.objects.filter(username="alice").exists()


def test_createoperator_submitter_is_a_service_account_with_a_token(db, no_password_variable):
    out, err = createoperator("ci-bot", "--submitter", "--token")

    user = User.objects.get(username="ci-bot")
    assert (user.is_staff, user.is_superuser, user.has_usable_password()) == (False, False, False)
    assert list(user.groups.values_list("name", flat=True)) == ["submitters"]
    assert len(out) == 65 and out.endswith("\n")
    assert AuthToken.objects.filter(user=user).count() == 1
    lines = err.splitlines()
    assert lines[:2] == [
        "created submitter ci-bot",
        "ci-bot has no password: a service account uses its API token",
    ]
    assert lines[2].startswith("new API token for ci-bot, valid until ")
    assert lines[2].endswith(" UTC: shown once, only its hash is kept")
    assert len(lines) == 3


def test_createoperator_role_change_keeps_exactly_one_role(db, no_password_variable):
    createoperator("alice")
    createoperator("alice", "--submitter")

    user = User.objects.get(username="alice")
    assert list(user.groups.values_list("name", flat=True)) == ["submitters"]
    assert (user.is_staff, user.is_superuser) == (False, False)


def test_createoperator_viewer_and_submitter_exclude_each_other(db):
    with pytest.raises(CommandError, match="not allowed with argument"):
        createoperator("alice", "--viewer", "--submitter")
    assert not User.objects.filter(username="alice").exists()
