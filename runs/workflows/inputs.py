"""The types a workflow's input fields may declare, checked against submitted JSON.

Input arrives as JSON, so the supported types are the JSON shapes: `str`, `int`,
`float`, `bool`, `list`, `dict`, `list[T]`, `dict[str, T]` and `T | None`
(`Optional[T]`), nested in any way. A declared annotation is parsed once, when the
workflow is declared, into an `InputType`; anything else (a set, a tuple, a class,
`dict[int, str]`, `int | str`) could never arrive from JSON or would be checked
wrongly, so it is refused then, not at submission.

An `InputType` checks a value (collecting one problem per wrong leaf, each naming its
path: `field 'ids'[2] must be int, got str`), names itself (`list[int]`) and gives its
JSON Schema fragment. The checks are those of JSON Schema, with one difference kept on
purpose: a bool is never an int or a float (Python says it is), while an int is a
float (and becomes one).
"""

from __future__ import annotations

import math
import types
import typing
from dataclasses import dataclass
from typing import Any

SUPPORTED = (
    "supported: str, int, float, bool, list, dict, list[T], dict[str, T] and T | None "
    "(Optional[T]), nested in any way (e.g. list[dict[str, int]])"
)

_JSON_TYPES: dict[type, str] = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "boolean",
    list: "array",
    dict: "object",
}


class UnsupportedType(Exception):
    """An annotation that is not one of the supported JSON shapes."""


class InputType:
    """A parsed field type: `check` a value, its readable `name`, its JSON `schema`."""

    @property
    def name(self) -> str:
        raise NotImplementedError

    @property
    def numeric(self) -> bool:
        return False

    def schema(self) -> dict[str, Any]:
        raise NotImplementedError

    def check(self, value: Any, path: str, problems: list[str], expected: str = "") -> Any:
        """Return the value as stored (an int becomes a float where a float is
        declared); append a problem naming `path` for every part that is wrong.
        `expected` names the type in the message when the value has the wrong shape
        (a nullable type passes its own name: "must be int | None")."""
        raise NotImplementedError


def _got(value: Any) -> str:
    return "None" if value is None else type(value).__name__


@dataclass(frozen=True)
class Scalar(InputType):
    """One of str, int, float, bool, and list or dict of anything."""

    py: type

    @property
    def name(self) -> str:
        return self.py.__name__

    @property
    def numeric(self) -> bool:
        return self.py in (int, float)

    def schema(self) -> dict[str, Any]:
        return {"type": _JSON_TYPES[self.py]}

    def check(self, value: Any, path: str, problems: list[str], expected: str = "") -> Any:
        if isinstance(value, bool) and self.py is not bool:
            problems.append(f"{path} must be {expected or self.name}, got bool")
            return value
        if self.py is float and isinstance(value, int | float):
            if not math.isfinite(value):
                # JSON has no NaN or Infinity: such a value could not even be stored.
                problems.append(f"{path} must be a finite number, got {value!r}")
                return value
            return float(value)
        if not isinstance(value, self.py):
            problems.append(f"{path} must be {expected or self.name}, got {_got(value)}")
        return value


@dataclass(frozen=True)
class ListOf(InputType):
    item: InputType

    @property
    def name(self) -> str:
        return f"list[{self.item.name}]"

    def schema(self) -> dict[str, Any]:
        return {"type": "array", "items": self.item.schema()}

    def check(self, value: Any, path: str, problems: list[str], expected: str = "") -> Any:
        if not isinstance(value, list):
            problems.append(f"{path} must be {expected or self.name}, got {_got(value)}")
            return value
        return [self.item.check(v, f"{path}[{i}]", problems) for i, v in enumerate(value)]


@dataclass(frozen=True)
class DictOf(InputType):
    value: InputType

    @property
    def name(self) -> str:
        return f"dict[str, {self.value.name}]"

    def schema(self) -> dict[str, Any]:
        return {"type": "object", "additionalProperties": self.value.schema()}

    def check(self, value: Any, path: str, problems: list[str], expected: str = "") -> Any:
        if not isinstance(value, dict):
            problems.append(f"{path} must be {expected or self.name}, got {_got(value)}")
            return value
        clean = {}
        for k, v in value.items():
            if not isinstance(k, str):  # never from JSON; possible from Python callers
                problems.append(f"{path} has a key {k!r} that is not a str")
                continue
            clean[k] = self.value.check(v, f"{path}[{k!r}]", problems)
        return clean


@dataclass(frozen=True)
class Nullable(InputType):
    inner: InputType

    @property
    def name(self) -> str:
        return f"{self.inner.name} | None"

    @property
    def numeric(self) -> bool:
        return self.inner.numeric

    def schema(self) -> dict[str, Any]:
        # Every fragment built here has one "type" string, so null joins it there
        # (`{"type": ["integer", "null"]}`); keywords such as "items" apply only to
        # their own type, so they stay right for the null case.
        fragment = self.inner.schema()
        return {**fragment, "type": [fragment["type"], "null"]}

    def check(self, value: Any, path: str, problems: list[str], expected: str = "") -> Any:
        if value is None:
            return None
        return self.inner.check(value, path, problems, expected or self.name)


def parse(annotation: Any) -> InputType:
    """The InputType of a declared annotation; UnsupportedType names what is wrong
    (the innermost unsupported part, and where it sits)."""
    try:
        return _parse(annotation)
    except _Unsupported as exc:
        where = "" if exc.part is annotation else f" in {display(annotation)}"
        raise UnsupportedType(
            f"unsupported type {display(exc.part)}{exc.why}{where}; {SUPPORTED}"
        ) from None


class _Unsupported(Exception):
    def __init__(self, part: Any, why: str = "") -> None:
        self.part, self.why = part, why


def _parse(annotation: Any) -> InputType:
    if isinstance(annotation, type) and annotation in _JSON_TYPES:
        return Scalar(annotation)
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is list and len(args) == 1:
        return ListOf(_parse(args[0]))
    if origin is dict and len(args) == 2:
        if args[0] is not str:
            raise _Unsupported(annotation, " (JSON object keys are str)")
        return DictOf(_parse(args[1]))
    if origin in (typing.Union, types.UnionType):
        others = [a for a in args if a is not types.NoneType]
        if len(others) == 1 and len(args) == 2:
            return Nullable(_parse(others[0]))
    raise _Unsupported(annotation)


def display(annotation: Any) -> str:
    """How an annotation reads in a message: `set[int]`, `Workflow`, `'int'`."""
    if isinstance(annotation, type) and not typing.get_args(annotation):
        return annotation.__name__
    if isinstance(annotation, types.GenericAlias | types.UnionType):
        return repr(annotation)
    if typing.get_origin(annotation) is not None:  # typing.List[int], Optional[int] …
        return repr(annotation).replace("typing.", "")
    return repr(annotation)
