"""The submit form, generated from a workflow's input JSON Schema.

Whatever declared the input (a field mapping or a pydantic model), the form reads
the same JSON Schema the API publishes: a number field for a number, a checkbox for a
boolean, a select for an enum, a text field for a string and a JSON text area for
anything else (lists, objects). The form only turns text into JSON values; the
workflow's own validation decides, and its problems are shown beside their fields.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.http import QueryDict

PREFIX = "input."  # form names of input fields, apart from the form's own (workflow)
READABLE_BOUND = 1e15
# The submit page's deadline is minutes from now, up to a year (the API takes any time).
DEADLINE_MAX_MINUTES = 366 * 24 * 60


@dataclass
class InputField:
    name: str
    widget: str  # integer | number | text | checkbox | select | json
    required: bool
    title: str = ""
    description: str = ""
    default: Any = None
    has_default: bool = False
    nullable: bool = False
    choices: list[Any] = field(default_factory=list)
    minimum: float | None = None
    exclusive_minimum: bool = False
    maximum: float | None = None
    value: str = ""  # what the form shows (the submitted text, or the default)
    checked: bool = False
    errors: list[str] = field(default_factory=list)

    @property
    def form_name(self) -> str:
        return PREFIX + self.name

    @property
    def html_id(self) -> str:
        return "in-" + "".join(c if c.isalnum() else "-" for c in self.name)

    @property
    def label(self) -> str:
        return self.title or self.name.replace("_", " ")

    @property
    def described_by(self) -> str:
        """The ids of what describes the field (its hint, its problems), for
        aria-describedby: a screen reader says them with the field."""
        ids = [f"{self.html_id}-help"] if self.hint else []
        if self.errors:
            ids.append(f"{self.html_id}-error")
        return " ".join(ids)

    @property
    def shown_maximum(self) -> str | None:
        """The maximum as a person reads it (100000, 0.5), or None when there is none or
        it is beyond any number a person types (a search field's 10**200 - 1)."""
        if self.maximum is None or abs(self.maximum) >= READABLE_BOUND:
            return None
        return str(int(self.maximum)) if self.maximum.is_integer() else f"{self.maximum:g}"

    @property
    def hint(self) -> str:
        parts = [self.description] if self.description else []
        if self.widget == "json":
            parts.append("JSON")
        # A bound beyond any number a person types (a search field's -(10**199 - 1)) says
        # nothing as a figure: the description says it in words.
        if self.minimum is not None and abs(self.minimum) < READABLE_BOUND:
            parts.append(
                f"{'more than' if self.exclusive_minimum else 'at least'} {self.minimum:g}"
            )
        if self.shown_maximum is not None:
            parts.append(f"at most {self.shown_maximum}")
        if self.has_default and self.widget != "checkbox":
            parts.append(
                "optional" if self.default is None else f"default {json.dumps(self.default)}"
            )
        return "; ".join(parts)


def _resolve(fragment: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    ref = fragment.get("$ref", "")
    if ref.startswith("#/$defs/"):
        return {**defs.get(ref.removeprefix("#/$defs/"), {}), **_without(fragment, "$ref")}
    return fragment


def _without(d: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != key}


def _base_type(fragment: dict[str, Any], defs: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """The fragment without its null alternative, and whether null is allowed."""
    fragment = _resolve(fragment, defs)
    options = fragment.get("anyOf") or fragment.get("oneOf")
    if options:
        non_null = [_resolve(o, defs) for o in options if o.get("type") != "null"]
        nullable = len(non_null) < len(options)
        if len(non_null) == 1:
            merged = {**_without(_without(fragment, "anyOf"), "oneOf"), **non_null[0]}
            return merged, nullable
        return {"type": "json"}, nullable
    kind = fragment.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        return {**fragment, "type": others[0] if len(others) == 1 else "json"}, "null" in kind
    return fragment, False


def fields_from_schema(schema: dict[str, Any]) -> list[InputField]:
    defs = schema.get("$defs", {})
    required = set(schema.get("required", []))
    fields = []
    for name, raw in schema.get("properties", {}).items():
        fragment, nullable = _base_type(raw, defs)
        kind = fragment.get("type")
        choices = fragment.get("enum") or ([fragment["const"]] if "const" in fragment else [])
        if choices:
            widget = "select"
        elif kind == "integer":
            widget = "integer"
        elif kind == "number":
            widget = "number"
        elif kind == "boolean":
            widget = "checkbox"
        elif kind == "string":
            widget = "text"
        else:
            widget = "json"
        has_default = "default" in raw or "default" in fragment
        default = raw.get("default", fragment.get("default"))
        exclusive = "minimum" not in fragment and "exclusiveMinimum" in fragment
        minimum = fragment.get("exclusiveMinimum") if exclusive else fragment.get("minimum")
        maximum = fragment.get("maximum")
        f = InputField(
            name=name,
            widget=widget,
            required=name in required,
            title=str(raw.get("title") or ""),
            description=str(raw.get("description") or fragment.get("description") or ""),
            default=default,
            has_default=has_default,
            nullable=nullable,
            choices=list(choices),
            minimum=float(minimum) if isinstance(minimum, int | float) else None,
            exclusive_minimum=exclusive,
            maximum=float(maximum) if isinstance(maximum, int | float) else None,
        )
        # Pydantic titles every field after its name ("Amount"): only a title that says
        # more than the name is worth showing.
        if f.title.lower().replace(" ", "_") == name.lower():
            f.title = ""
        if has_default:
            f.checked = default is True
            f.value = _shown(default, widget)
        fields.append(f)
    return fields


def _shown(value: Any, widget: str) -> str:
    if value is None:
        return ""
    if widget in ("json",):
        return json.dumps(value, indent=2)
    if widget == "select":
        return json.dumps(value)
    return str(value)


def parse(fields: list[InputField], data: QueryDict) -> dict[str, Any]:
    """Turn the form's text into the input object. A field left empty is left out
    (its default applies, or the workflow says it is missing). Text that is not a
    number or not JSON is an error on its field (and the value is left out)."""
    result: dict[str, Any] = {}
    for f in fields:
        if f.widget == "checkbox":
            f.checked = data.get(f.form_name) == "on"
            result[f.name] = f.checked
            continue
        text = data.get(f.form_name, "")
        f.value = text
        if text.strip() == "":
            continue
        try:
            result[f.name] = _value(f, text)
        except ValueError as exc:
            f.errors.append(str(exc))
    return result


def _value(f: InputField, text: str) -> Any:
    text = text.strip()
    if f.widget == "integer":
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"enter a whole number, not {text!r}") from None
    if f.widget == "number":
        try:
            number = float(text)
        except ValueError:
            raise ValueError(f"enter a number, not {text!r}") from None
        return int(number) if number.is_integer() and "." not in text else number
    if f.widget == "text":
        return text
    if f.widget == "select":
        for choice in f.choices:
            if json.dumps(choice) == text:
                return choice
        raise ValueError(f"choose one of {', '.join(json.dumps(c) for c in f.choices)}")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f"not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
        ) from None


def attach_problems(
    fields: list[InputField], by_field: dict[str, list[str]], problems: list[str]
) -> list[str]:
    """Put the workflow's problems beside their fields; return those that belong to
    no field (an unknown field, a problem with the whole input)."""
    known = {f.name: f for f in fields}
    placed: set[str] = set()
    for name, messages in by_field.items():
        if name in known:
            known[name].errors.extend(messages)
            placed.update(messages)
    return [p for p in problems if p not in placed]


def deadline_from(text: str, now: datetime) -> datetime | None:
    """The submit page's deadline (docs/operating.md#deadlines): `text` minutes after
    `now`, or None for an empty field. Raises ValueError with the words said beside the
    field."""
    text = text.strip()
    if not text:
        return None
    try:
        minutes = float(text)
    except ValueError:
        raise ValueError(f"a number of minutes, e.g. 30, not {text!r}") from None
    if not math.isfinite(minutes) or minutes <= 0:
        raise ValueError("more than 0 minutes from now")
    if minutes > DEADLINE_MAX_MINUTES:
        raise ValueError(f"at most {DEADLINE_MAX_MINUTES} minutes (a year) from now")
    return now + timedelta(minutes=minutes)
