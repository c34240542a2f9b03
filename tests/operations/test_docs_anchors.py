"""Every `docs/<page>.md#<anchor>` that the code, the templates, the configuration or
the docs themselves cite leads to a heading that exists, with the anchor GitHub makes of
it: a renamed heading breaks the test, not the reader's link."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# `docs/operating.md#alerts` anywhere; `operating.md#alerts` or `(#alerts)` inside docs/.
CITED = re.compile(r"(?:docs/)?([a-z]+)\.md#([a-z0-9_-]+)")
OWN = re.compile(r"\]\(#([a-z0-9_-]+)\)")
SOURCES = ("*.py", "*.sql", "*.html", "*.js", "*.md", "*.yml", "*.yaml", "*.conf", "Makefile")


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation but `-` and `_` gone,
    each space a hyphen."""
    text = re.sub(r"[`*]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    seen: dict[str, int] = {}
    in_code = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            in_code = not in_code
        if in_code or not line.startswith("#"):
            continue
        base = slug(line.lstrip("#"))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def tracked_files() -> list[Path]:
    out = subprocess.run(
        ["git", "ls-files", *SOURCES], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout
    return [ROOT / name for name in out.split()]


def test_every_cited_docs_anchor_exists():
    pages = {p.stem: anchors(p) for p in DOCS.glob("*.md")}
    broken: list[str] = []
    cited = 0
    for path in tracked_files():
        text = path.read_text(errors="replace")
        in_docs = path.parent == DOCS
        lines = text.splitlines()
        for number, line in enumerate(lines, 1):
            for page, anchor in CITED.findall(line):
                if anchor.endswith("-") and number < len(lines):
                    # Wrapped at a hyphen: the rest starts the next line, after its
                    # comment marker (`#`, `--`, `//`, a docstring's indent).
                    rest = re.match(r"[\s#/*\"'-]*?([a-z0-9_-]+)", lines[number].lstrip("#-/ "))
                    anchor += rest[1] if rest else ""
                if page not in pages:
                    if "docs/" in line or in_docs:
                        broken.append(f"{path.relative_to(ROOT)}:{number}: no docs/{page}.md")
                    continue
                cited += 1
                if anchor not in pages[page]:
                    broken.append(f"{path.relative_to(ROOT)}:{number}: {page}.md#{anchor}")
            if in_docs:
                for anchor in OWN.findall(line):
                    cited += 1
                    if anchor not in pages[path.stem]:
                        broken.append(f"{path.relative_to(ROOT)}:{number}: #{anchor}")
    assert not broken, "\n".join(broken)
    assert cited > 150, cited  # the pattern still finds what is cited
