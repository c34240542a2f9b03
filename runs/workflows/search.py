"""Search fields (docs/authoring.md#search-fields): the input fields a workflow names
with `search=`, whose values the engine copies, as text, into runs.RunSearchKey when
a run is submitted, so that an operator finds "change 301" without its run id.

Only scalar fields are searchable: an int (its decimal text, `301`) or a string (as
given). That is checked when the workflow is declared: a list, a dict, a float (whose
text is ambiguous: 1.0 or 1) or a bool is refused then, as is a name the input does
not declare. An optional field that holds None, and a string longer than
SEARCH_VALUE_MAX characters, give no search key (nobody types it into a box; the
index stays small and its entries within PostgreSQL's btree limit).

An int search field is an identifier, and its text must fit the key
(RunSearchKey.value, SEARCH_VALUE_MAX characters): a value beyond SEARCH_INT (from
-(10**199 - 1) to 10**200 - 1) is refused with the input's other problems when the
run is submitted, naming the field and the bound, and the input's JSON Schema says
the range. Not dropped like an overlong string: a string search field may hold long
text that is not looked up, but an int of 201 digits is no identifier anyone holds,
only a mistake, and a run accepted with it could never be found by the id it was
submitted for.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import WorkflowDefinitionError
from .inputs import DeclaredInput, IntBound

SEARCH_VALUE_MAX = 200
# Field names as they appear in a query string and in the filter's <select>.
FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
# Declared types (inputs.py names) whose values have one obvious text.
SEARCHABLE_TYPES = ("int", "str", "int | None", "str | None")
# The same, as a pydantic model's JSON Schema says them.
SEARCHABLE_JSON = ("integer", "string")


def _too_long(name: str, value: int) -> str:
    return (
        f"field {name!r} is a search field, so its text must be at most {SEARCH_VALUE_MAX} "
        f"characters (from -(10**{SEARCH_VALUE_MAX - 1} - 1) to 10**{SEARCH_VALUE_MAX} - 1); "
        f"got {_text_length(value)}"
    )


def _text_length(value: int) -> str:
    """How long an int's decimal text is, without making the text of one so long that
    Python refuses to (sys.get_int_max_str_digits)."""
    try:
        return str(len(str(value)))
    except ValueError:
        return f"more than {sys.get_int_max_str_digits()}"


# The range of an int search field: its decimal text fits RunSearchKey.value.
SEARCH_INT = IntBound(
    low=-(10 ** (SEARCH_VALUE_MAX - 1) - 1),
    high=10**SEARCH_VALUE_MAX - 1,
    problem=_too_long,
    note=f"a search field: at most {SEARCH_VALUE_MAX} digits ({SEARCH_VALUE_MAX - 1} when "
    "negative)",
)


def bound_search_ints(fields: Iterable[str], declared: DeclaredInput) -> None:
    """Give each int search field its range (SEARCH_INT), checked with the input."""
    types = _field_types(declared)
    for name in fields:
        if types.get(name) in ("int", "int | None", "integer"):
            declared.int_bounds[name] = SEARCH_INT


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
        # Beyond SEARCH_INT the input was refused (bound_search_ints): never stored.
        return None if SEARCH_INT.refuses(value) else str(value)
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
