"""The project's SQL: named statements in .sql files beside the modules that run them
(the loader is runs/sql/__init__.py), every one of them used, none with a value written
into it; and outside the engine, nothing reaches past its door (runs/engine/__init__.py)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from psycopg import _queries

from runs import sql, states

ROOT = Path(__file__).resolve().parents[2]
ENGINE = ROOT / "runs" / "engine"
# Every statement file of the project; runs/sql/schema.sql is the migrations' schema
# (tests/engine/test_schema_file.py), not statements a module runs.
SQL_FILES = sorted(
    path
    for app in ("runs", "reconciliation", "api", "config")
    for path in (ROOT / app).rglob("*.sql")
    if path != ROOT / "runs" / "sql" / "schema.sql"
)
# Outside runs/: programs that use the engine as any caller does.
# runs.engine's layers (pyproject.toml's layers contract), and its second door, tools.
LAYERS = ("entry", "policies", "attempts", "state", "core")
TOOLS = sorted(
    path for folder in ("bench", "examples", "scripts") for path in (ROOT / folder).rglob("*.py")
)


def _parse(text: str, includes: dict[str, str] | None = None) -> sql.Statements:
    return sql.parse(text, Path("example.sql"), includes or {})


def test_blocks_are_read_by_name_with_their_includes():
    statements = _parse(
        "-- a header, not a statement\n"
        "-- name: part\n    a AS (SELECT 1)\n\n"
        "-- name: whole\n    -- what it is for\n    WITH\n    -- include: part\n"
        "    SELECT * FROM a -- a trailing comment stays\n"
    )
    assert list(statements) == ["part", "whole"]
    # Sent without whole-line comments, blank lines and indentation (psycopg caches how
    # it splits a statement only under 4 KB).
    whole = "WITH\na AS (SELECT 1)\nSELECT * FROM a -- a trailing comment stays"
    assert statements["whole"] == whole
    assert _parse("-- name: mine\n  -- include: theirs\n", {"theirs": "X"})["mine"] == "X"


def test_the_hot_paths_statements_are_short_enough_for_psycopgs_cache():
    """psycopg splits a statement around its parameters on every execution unless its
    text is under MAX_CACHED_STATEMENT_LENGTH: a step's and a map item's statements."""
    attempts = ENGINE / "attempts"
    ready = sql.load(str(ENGINE / "state" / "ready.py"))
    loaded = {
        "start.sql": (start := sql.load(str(attempts / "start.py"))),
        "finish.sql": sql.load(str(attempts / "finish.py"), includes={**ready, **start}),
        "items.sql": sql.load(str(attempts / "items.py")),
        "claims.sql": sql.load(str(attempts / "claims.py")),
        "events.sql": sql.load(str(ROOT / "runs" / "record" / "events.py")),
    }
    for file, statements in loaded.items():
        for name, text in statements.items():
            assert len(text.encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH, (file, name)


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
    assert len([p for p in SQL_FILES if p.is_relative_to(ENGINE)]) >= 8
    for path in SQL_FILES:
        assert path.with_suffix(".py").exists(), f"{path} has no module beside it"


@pytest.mark.parametrize("path", SQL_FILES, ids=lambda p: str(p.relative_to(ROOT)))
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


def _modules_with_statements() -> list[Path]:
    """The engine's modules, and every other module that has a .sql file beside it."""
    return sorted({*ENGINE.rglob("*.py"), *(p.with_suffix(".py") for p in SQL_FILES)})


def test_the_engine_builds_no_sql_text_at_run_time():
    """Every execute() in the engine, and in any module with a .sql file, runs a
    statement of its module's .sql file as it was read at import: SQL["name"], never
    text put together at run time."""
    modules = _modules_with_statements()
    assert ROOT / "runs" / "record" / "events.py" in modules
    for module in modules:
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
                ), f"{module.relative_to(ROOT)}:{node.lineno} executes {ast.unparse(first)}"


@pytest.mark.parametrize("path", TOOLS, ids=lambda p: str(p.relative_to(ROOT)))
def test_tools_use_the_engine_through_its_door(path):
    """The import contracts ([tool.importlinter]) hold the apps to runs.engine's door;
    bench/, examples/ and scripts/ are not packages import-linter reads, so this does.
    bench/ may also use the tools' door, runs.engine.tools; examples/ and scripts/ may
    not (docs/architecture.md#the-engines-layers)."""
    bench = path.is_relative_to(ROOT / "bench")
    for node in ast.walk(ast.parse(path.read_text())):
        names = (
            [node.module or ""]
            + [f"runs.engine.{a.name}" for a in node.names if node.module == "runs.engine"]
            if isinstance(node, ast.ImportFrom)
            else [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else []
        )
        for name in names:
            # `from runs.engine import submit` names a verb, not a module: only the
            # engine's subpackages and tools are modules under it.
            if name.count(".") == 2 and name.rpartition(".")[2] not in (*LAYERS, "tools"):
                continue
            if bench and name == "runs.engine.tools":
                continue
            assert not name.startswith("runs.engine."), (
                f"{path.relative_to(ROOT)}:{node.lineno} imports {name}: use runs.engine"
            )
