"""Which part of a page an htmx request asks for: every page names its live parts as
partials inside its one template (django-template-partials), and htmx names the
element it swaps (`HX-Target`), so a view maps one to the other instead of testing
the target itself."""

from __future__ import annotations

from collections.abc import Mapping

from django.http import HttpRequest


def template_for(request: HttpRequest, template: str, parts: str | Mapping[str, str]) -> str:
    """`template#part` when htmx asks for a target that `parts` maps to a part (a
    plain string: the target and the part share that name), else the whole page."""
    htmx = getattr(request, "htmx", None)
    target = htmx.target if htmx else None
    by_target = {parts: parts} if isinstance(parts, str) else parts
    part = by_target.get(target) if target else None
    return f"{template}#{part}" if part else template


def is_partial(template: str) -> bool:
    """Whether template_for() chose a part (which then swaps its neighbours out of band)."""
    return "#" in template
