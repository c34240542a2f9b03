"""The engine's SQL: named statements in .sql files beside the modules that run them
(runs/engine/core/sql.py), every one of them used, none with a value written into it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from runs import states
from runs.engine.core import sql

ENGINE = Path(__file__).resolve().parents[2] / "runs" / "engine"
SQL_FILES = sorted(ENGINE.rglob("*.sql"))


def _parse(text: str, includes: dict[str, str] | None = None) -> sql.Statements:
    return sql.parse(text, Path("example.sql"), includes or {})


def test_blocks_are_read_by_name_with_their_includes():
    statements = _parse(
        "-- a header, not a statement\n"
        "-- name: part\n    a AS (SELECT 1)\n\n"
        "-- name: whole\n    WITH\n    -- include: part\n    SELECT * FROM a\n"
    )
    assert list(statements) == ["part", "whole"]
    assert statements["whole"] == "WITH\na AS (SELECT 1)\n    SELECT * FROM a"
    assert _parse("-- name: mine\n  -- include: theirs\n", {"theirs": "X"})["mine"] == "X"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n", "two statements named 'a'"),
        ("-- name: a\n-- include: b\n", "'a' includes 'b', which is not known"),
        ("-- name: a\n-- include: b\n-- name: b\n-- include: a\n", "includes itself"),
    ],
)
def test_a_file_that_cannot_be_put_together_is_refused_at_import(text, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        _parse(text)


def test_a_missing_statement_names_its_file():
    with pytest.raises(KeyError, match=r"example\.sql has no statement named 'nope'"):
        _parse("-- name: a\nSELECT 1\n")["nope"]


def test_the_engine_has_sql_files_and_each_sits_beside_its_module():
    assert len(SQL_FILES) >= 8
    for path in SQL_FILES:
        assert path.with_suffix(".py").exists(), f"{path} has no module beside it"


@pytest.mark.parametrize("path", SQL_FILES, ids=lambda p: str(p.relative_to(ENGINE)))
def test_every_statement_is_used_and_takes_its_values_as_parameters(path):
    text = path.read_text()
    module = path.with_suffix(".py").read_text()
    names = re.findall(r"^-- name: (\w+)", text, re.MULTILINE)
    included = set(re.findall(r"-- include: (\w+)", "".join(p.read_text() for p in SQL_FILES)))
    for name in names:
        assert f'"{name}"' in module or name in included, f"{path.name}: {name} is never run"
    # A value is a parameter: no positional %s, and no status of ours as a literal.
    assert not re.search(r"%s", text), f"{path.name}: use named parameters, %(name)s"
    statuses = {
        str(v)
        for enum in (states.RunStatus, states.StepStatus, states.AttemptStatus, states.ClaimStatus)
        for v in enum
    }
    body = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("--"))
    literals = set(re.findall(r"'([a-z_]+)'", body))
    assert not literals & statuses, (
        f"{path.name}: statuses written into the text: {literals & statuses}"
    )


def test_the_engine_builds_no_sql_text_at_run_time():
    """Every execute() in the engine runs a statement of its module's .sql file, as it
    was read at import: SQL["name"], never text put together at run time."""
    for module in ENGINE.rglob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "execute"
                and node.args
            ):
                first = node.args[0]
                assert (
                    isinstance(first, ast.Subscript)
                    and isinstance(first.value, ast.Name)
                    and first.value.id == "SQL"
                    and isinstance(first.slice, ast.Constant | ast.IfExp)
                ), f"{module.relative_to(ENGINE)}:{node.lineno} executes {ast.unparse(first)}"
