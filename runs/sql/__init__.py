"""The engine's SQL, as named statements in `.sql` files beside the modules that run them.

A file holds blocks, each opened by a `-- name: <name>` line; the block is the text up to
the next one. A line `-- include: <name>` inside a block is replaced by that block (of
the same file, or of the mappings passed as `includes`), so that two statements sharing
a part write it once. Everything is read and put together once, at import; the text a
module executes never changes, so the prepared cursor (runs/sql/prepared.py) prepares each
statement once per connection. Values, statuses included, are always parameters
(`%(name)s`), never written into the text. Comments stay in the file: the text sent
carries none of them.

Beside the loader, the package holds the rest of the database plumbing: schema (the
hand-made objects in schema.sql and the migration operation that loads them), prepared
(the cursor that prepares the hot statements), routing (the read replica's alias and
router) and dburl (the DATABASE_URL of a connection, for child processes).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

_NAME = re.compile(r"^-- name: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^\s*-- include: ([a-z_][a-z0-9_]*)\s*$", re.MULTILINE)


class Statements(Mapping[str, str]):
    """The blocks of one `.sql` file, by name; a missing name is a KeyError that says
    which file was read."""

    def __init__(self, path: Path, blocks: dict[str, str]) -> None:
        self.path, self._blocks = path, blocks

    def __getitem__(self, name: str) -> str:
        try:
            return self._blocks[name]
        except KeyError:
            raise KeyError(f"{self.path.name} has no statement named {name!r}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self._blocks)

    def __len__(self) -> int:
        return len(self._blocks)


def load(module_file: str, *, includes: Mapping[str, str] | None = None) -> Statements:
    """The statements of the `.sql` file beside `module_file` (call with `__file__`)."""
    path = Path(module_file).with_suffix(".sql")
    return parse(path.read_text(encoding="utf-8"), path, includes or {})


def parse(text: str, path: Path, includes: Mapping[str, str]) -> Statements:
    marks = list(_NAME.finditer(text))
    raw: dict[str, str] = {}
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        name = mark.group(1)
        if name in raw:
            raise ValueError(f"{path.name}: two statements named {name!r}")
        end = following.start() if following is not None else len(text)
        raw[name] = text[mark.end() : end].strip()

    def resolve(name: str, seen: tuple[str, ...]) -> str:
        if name in seen:
            raise ValueError(f"{path.name}: {' -> '.join((*seen, name))} includes itself")
        if name in raw:
            body = raw[name]
        elif name in includes:
            return includes[name]
        else:
            raise ValueError(f"{path.name}: {seen[-1]!r} includes {name!r}, which is not known")
        return _INCLUDE.sub(lambda m: resolve(m.group(1), (*seen, name)), body)

    return Statements(path, {name: _compact(resolve(name, ())) for name in raw})


def _compact(text: str) -> str:
    """The statement as sent: without its whole-line comments, blank lines and
    indentation. psycopg caches how it splits a statement around its parameters only
    for texts under 4 KB (psycopg/_queries.py, MAX_CACHED_STATEMENT_LENGTH), and the
    commented start and finish were over it: split again on every execution (py-spy:
    about 8% of a chained step's worker time)."""
    lines = (line.strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line and not line.startswith("--"))
