"""A workflow's declared input: the types its fields may declare, checked against
submitted JSON, or a pydantic model instead; validating an input, and the input as
JSON Schema and as the API describes it.

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

A `DeclaredInput` is what a workflow's `input=` declares, checked when the workflow is
declared: a mapping of field names to types or `Field`s, or a pydantic model, which
then validates and documents the input instead.
"""

from __future__ import annotations

import copy
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runs.errors import InvalidInput
from runs.userinput import json_problem

from .errors import WorkflowDefinitionError

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


_MISSING: Any = object()

# validate refuses with at most this many problems: a list of 10,000 wrong items
# deserves one clear message, not 10,000.
MAX_PROBLEMS = 10


@dataclass(frozen=True)
class Field:
    """One declared input field: its type (see InputType for the supported ones), an
    optional default and, for a number, a lower and an upper bound (`min`, `max`,
    both inclusive). Checked when the workflow is declared: an unsupported type, a
    default that does not fit the type or its bounds, `min` above `max`, or a bound on
    anything but a number is refused then."""

    type: Any
    default: Any = _MISSING
    min: float | None = None
    max: float | None = None

    @property
    def required(self) -> bool:
        return self.default is _MISSING


@dataclass(frozen=True)
class IntBound:
    """A range an int field must lie in beyond what its declaration says, added by the
    workflow (a search field's, search.py: its text must fit the index). Checked with
    the declared types, whatever declared them (a mapping or a pydantic model), and
    published in the JSON Schema (`minimum`, `maximum`, and `note` as the field's
    description when it has none). `problem(name, value)` says why a value is refused."""

    low: int
    high: int
    problem: Callable[[str, int], str]
    note: str

    def refuses(self, value: Any) -> bool:
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and not (self.low <= value <= self.high)
        )

    def tighten(self, fragment: dict[str, Any]) -> dict[str, Any]:
        """The JSON Schema fragment of the field with this range added, its own bounds
        kept where they are tighter (a `minimum` above low, an `exclusiveMinimum`)."""
        out = dict(fragment)
        own_low = [out[k] for k in ("minimum", "exclusiveMinimum") if k in out]
        if not any(isinstance(b, int | float) and b >= self.low for b in own_low):
            out["minimum"] = self.low
        own_high = [out[k] for k in ("maximum", "exclusiveMaximum") if k in out]
        if not any(isinstance(b, int | float) and b <= self.high for b in own_high):
            out["maximum"] = self.high
        out.setdefault("description", self.note)
        return out


class DeclaredInput:
    """A workflow's `input=`: field name -> a type or a Field, or a pydantic model.
    `where` names the workflow in the WorkflowDefinitionError of a wrong declaration."""

    def __init__(self, declared: Mapping[str, Any] | type, where: str) -> None:
        self.where = where
        # Typed input: a pydantic model validates and documents the input instead of
        # the field mapping (see validate and schema).
        self.model: Any = None
        if isinstance(declared, type):
            self.model = _pydantic_model(declared, where)
            declared = {}
        self.fields: dict[str, Field] = {
            k: v if isinstance(v, Field) else Field(v) for k, v in declared.items()
        }
        self.types: dict[str, InputType] = {}
        self.defaults: dict[str, Any] = {}
        for key, spec in self.fields.items():
            self._check_field(key, spec)
        # Ranges the workflow adds to int fields (IntBound), by field name.
        self.int_bounds: dict[str, IntBound] = {}

    def _check_field(self, key: str, spec: Field) -> None:
        where = f"{self.where}, input field {key!r}"
        try:
            tp = parse(spec.type)
        except UnsupportedType as exc:
            raise WorkflowDefinitionError(f"{where}: {exc}") from None
        for bound_name, bound in (("min", spec.min), ("max", spec.max)):
            if bound is None:
                continue
            if not tp.numeric:
                raise WorkflowDefinitionError(
                    f"{where}: {bound_name}= needs a number type (int, float, int | None, "
                    f"float | None), not {tp.name}"
                )
            if isinstance(bound, bool) or not isinstance(bound, int | float):
                raise WorkflowDefinitionError(f"{where}: {bound_name}= must be a number")
            if not math.isfinite(bound):
                raise WorkflowDefinitionError(f"{where}: {bound_name}= must be finite")
        if spec.min is not None and spec.max is not None and spec.min > spec.max:
            raise WorkflowDefinitionError(f"{where}: min={spec.min!r} is above max={spec.max!r}")
        if not spec.required:
            problems: list[str] = []
            default = tp.check(spec.default, "default", problems)
            if problems:
                raise WorkflowDefinitionError(f"{where}: {problems[0]}")
            if spec.min is not None and default is not None and default < spec.min:
                raise WorkflowDefinitionError(
                    f"{where}: default {spec.default!r} is below min={spec.min!r}"
                )
            if spec.max is not None and default is not None and default > spec.max:
                raise WorkflowDefinitionError(
                    f"{where}: default {spec.default!r} is above max={spec.max!r}"
                )
            self.defaults[key] = default
        self.types[key] = tp

    def validate(self, data: Any) -> dict[str, Any]:
        """Return the input with defaults filled in, or raise InvalidInput naming every
        problem (the first MAX_PROBLEMS of them) by its path. Unknown fields are
        refused: a typo must not be silently ignored."""
        if not isinstance(data, dict):
            raise InvalidInput(["input must be a JSON object"])
        clean = self._validate_model(data) if self.model is not None else self._validate(data)
        if self.model is not None:
            self._check_bounds(clean)
        unusable = json_problem(clean)
        if unusable:  # whatever the way in (a form, a script): PostgreSQL could not store it
            raise InvalidInput([f"input is not usable: {unusable}"])
        return clean

    def _validate(self, data: dict[str, Any]) -> dict[str, Any]:
        problems: list[str] = []
        # The problems of each top-level field, for a form to show next to it.
        by_field: dict[str, list[str]] = {}
        clean: dict[str, Any] = {}
        for key in sorted(set(data) - set(self.fields)):
            problems.append(f"unknown field {key!r}")
        for key, spec in self.fields.items():
            tp = self.types[key]
            before = len(problems)
            if key not in data:
                if spec.required:
                    problems.append(f"missing field {key!r} ({tp.name})")
                else:  # a copy: a run must never share a mutable default with the next
                    clean[key] = copy.deepcopy(self.defaults[key])
            else:
                value = tp.check(data[key], f"field {key!r}", problems)
                if len(problems) == before:
                    bound = self.int_bounds.get(key)
                    if spec.min is not None and value is not None and value < spec.min:
                        problems.append(
                            f"field {key!r} must be at least {_number(spec.min)}, got {data[key]!r}"
                        )
                    elif bound is not None and bound.refuses(value):
                        problems.append(bound.problem(key, value))
                    elif spec.max is not None and value is not None and value > spec.max:
                        # After the search bound: a 201-digit value is told what is wrong
                        # with its length, not shown back whole.
                        problems.append(
                            f"field {key!r} must be at most {_number(spec.max)}, got {data[key]!r}"
                        )
                    else:
                        clean[key] = value
            if len(problems) > before:
                by_field[key] = problems[before:]
        if problems:
            raise InvalidInput(_capped(problems), by_field)
        return clean

    def _check_bounds(self, clean: dict[str, Any]) -> None:
        """The int bounds of a model's input, which the model does not know of."""
        by_field = {
            key: [bound.problem(key, clean[key])]
            for key, bound in self.int_bounds.items()
            if bound.refuses(clean.get(key))
        }
        if by_field:
            raise InvalidInput([p for problems in by_field.values() for p in problems], by_field)

    def _validate_model(self, data: dict[str, Any]) -> dict[str, Any]:
        """Validate with the declared pydantic model; each problem names its field path
        (`field 'address.zip': …`), and the clean input is the model's JSON dump, so
        defaults are filled in and the stored input is plain JSON."""
        import pydantic

        try:
            value = self.model.model_validate(data)
        except pydantic.ValidationError as exc:
            problems: list[str] = []
            by_field: dict[str, list[str]] = {}
            for error in exc.errors():
                path = ".".join(str(part) for part in error["loc"])
                if error["type"] == "missing":
                    text = f"missing field {path!r}"
                elif error["type"] == "extra_forbidden":
                    text = f"unknown field {path!r}"
                else:
                    text = f"field {path!r}: {error['msg']}"
                problems.append(text)
                if error["loc"]:
                    by_field.setdefault(str(error["loc"][0]), []).append(text)
            raise InvalidInput(_capped(problems), by_field) from None
        return dict(value.model_dump(mode="json"))

    def schema(self, title: str, description: str) -> dict[str, Any]:
        """The input as a JSON Schema (draft 2020-12) object: what validate accepts,
        for clients, the API's documentation and the submit form."""
        if self.model is not None:
            schema = dict(self.model.model_json_schema())
            if self.int_bounds:
                bounded = dict(schema.get("properties", {}))
                for key, bound in self.int_bounds.items():
                    if key in bounded:
                        bounded[key] = bound.tighten(bounded[key])
                schema["properties"] = bounded
            schema.setdefault("title", title)
            if description:
                schema.setdefault("description", description)
            return {"$schema": "https://json-schema.org/draft/2020-12/schema", **schema}
        properties: dict[str, Any] = {}
        for key, spec in self.fields.items():
            fragment = self.types[key].schema()
            if not spec.required:
                fragment["default"] = self.defaults[key]
            if spec.min is not None:
                fragment["minimum"] = spec.min
            if spec.max is not None:
                fragment["maximum"] = spec.max
            if key in self.int_bounds:
                fragment = self.int_bounds[key].tighten(fragment)
            properties[key] = fragment
        return {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": title,
            **({"description": description} if description else {}),
            "type": "object",
            "properties": properties,
            "required": [k for k, spec in self.fields.items() if spec.required],
            "additionalProperties": False,
        }

    def describe(self) -> dict[str, Any]:
        """Each field's type, whether it is required, its default and bound (for a
        model: the type and default its JSON Schema gives)."""
        if self.model is not None:
            return self._describe_model()
        return {
            k: {"type": self.types[k].name, "required": f.required}
            | ({} if f.required else {"default": self.defaults[k]})
            | ({} if f.min is None else {"min": f.min})
            | ({} if f.max is None else {"max": f.max})
            for k, f in self.fields.items()
        }

    def _describe_model(self) -> dict[str, Any]:
        schema = dict(self.model.model_json_schema())
        required = set(schema.get("required", []))
        return {
            key: {"type": prop.get("type", "any"), "required": key in required}
            | ({"default": prop["default"]} if "default" in prop else {})
            for key, prop in schema.get("properties", {}).items()
        }


def _number(bound: float) -> str:
    """A bound as a person writes it: 100000, not 1e+05; 0.5 as is."""
    if isinstance(bound, int) or (float(bound).is_integer() and abs(bound) < 1e15):
        return str(int(bound))
    return f"{bound:g}"


def _capped(problems: list[str]) -> list[str]:
    if len(problems) > MAX_PROBLEMS:
        more = len(problems) - MAX_PROBLEMS
        return [*problems[:MAX_PROBLEMS], f"and {more} more problems"]
    return problems


def _pydantic_model(cls: type, where: str) -> Any:
    """`input=` given a class: it must be a pydantic model, and its JSON Schema must
    exist (checked now, so a model the API cannot document fails at import time)."""
    try:
        import pydantic
    except ImportError:  # pragma: no cover - pydantic is a dependency
        raise WorkflowDefinitionError(f"{where}: a typed input needs pydantic") from None
    if not issubclass(cls, pydantic.BaseModel):
        raise WorkflowDefinitionError(
            f"{where}: input= takes a mapping of field types or a pydantic model, "
            f"not the class {cls.__name__}"
        )
    try:
        cls.model_json_schema()
    except Exception as exc:
        raise WorkflowDefinitionError(f"{where}: input model has no JSON Schema: {exc}") from None
    return cls
