"""Reading a page's markup as a browser does: the templates break long tags and text
over lines (tests/pages/test_template_lines.py), and a run of whitespace there means
what one space means, so a test that matches markup folds it first."""

from __future__ import annotations


def folded(html: str | bytes) -> str:
    """`html` with every run of whitespace (newlines and indents included) as one space."""
    text = html.decode() if isinstance(html, bytes) else html
    return " ".join(text.split())
