"""Search fields (docs/authoring.md#search-fields): the input fields a workflow names
with `search=`, whose values the engine copies, as text, into runs.RunSearchKey when
a run is submitted, so that an operator finds "change 301" without its run id.

Only scalar fields are searchable: an int (its decimal text, `301`) or a string (as
given). That is checked when the workflow is declared: a list, a dict, a float (whose
text is ambiguous: 1.0 or 1) or a bool is refused then, as is a name the input does
not declare. An optional field that holds None, and a string longer than
SEARCH_VALUE_MAX characters, give no search key (nobody types it into a box; the
index stays small and its entries within PostgreSQL's btree limit).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import WorkflowDefinitionError
from .inputs import DeclaredInput

SEARCH_VALUE_MAX = 200
# Field names as they appear in a query string and in the filter's <select>.
FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
# Declared types (inputs.py names) whose values have one obvious text.
SEARCHABLE_TYPES = ("int", "str", "int | None", "str | None")
# The same, as a pydantic model's JSON Schema says them.
SEARCHABLE_JSON = ("integer", "string")


def check_search_fields(
    names: Iterable[str], declared: DeclaredInput, where: str
) -> tuple[str, ...]:
    """The declared search fields, or a WorkflowDefinitionError naming the first wrong
    one and what would be right."""
    if isinstance(names, str):
        raise WorkflowDefinitionError(
            f"{where}: search= takes a tuple of input field names, e.g. search=({names!r},)"
        )
    fields = tuple(names)
    if len(set(fields)) != len(fields):
        raise WorkflowDefinitionError(f"{where}: search= names a field twice: {list(fields)!r}")
    types = _field_types(declared)
    for name in fields:
        if not isinstance(name, str) or not FIELD_NAME.fullmatch(name):
            raise WorkflowDefinitionError(
                f"{where}: search field {name!r} is not an input field name "
                "(letters, digits and _, at most 100)"
            )
        if name not in types:
            known = ", ".join(sorted(types)) or "none"
            raise WorkflowDefinitionError(
                f"{where}: search field {name!r} is not a field of the input (its fields: {known})"
            )
        if types[name] not in SEARCHABLE_TYPES + SEARCHABLE_JSON:
            raise WorkflowDefinitionError(
                f"{where}: search field {name!r} is {types[name]}; only int and str "
                "fields (or optional ones) can be searched, as their text"
            )
    return fields


def _field_types(declared: DeclaredInput) -> dict[str, str]:
    if declared.model is not None:
        props = dict(declared.model.model_json_schema()).get("properties", {})
        return {key: str(prop.get("type", "any")) for key, prop in props.items()}
    return {key: tp.name for key, tp in declared.types.items()}


def search_text(value: Any) -> str | None:
    """The text a value is found by: an int's decimal digits, a string as given; None
    for anything that gives no search key (see the module's docstring)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and 0 < len(value) <= SEARCH_VALUE_MAX:
        return value
    return None


def search_keys(fields: Iterable[str], run_input: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(field, text) of each search field the validated input gives a value for."""
    keys = []
    for name in fields:
        text = search_text(run_input.get(name))
        if text is not None:
            keys.append((name, text))
    return keys
