"""runs/sql/schema.sql holds the hand-made database objects (trigger functions and
triggers) as the database has them now; LoadSchema is the migration operation that
applies it: first in 0024_current_schema, then in one more migration each time the file
changes.

A LoadSchema names the digest of the file it was written for, and runs the file only
while the file is still that one. Once the file has changed, the migration that names
the new digest loads it, and the older ones do nothing: on a database migrated from zero
they run before the migrations that the newer file may rely on (a trigger on a column
added since would fail there), and the objects that the migrations before them made are
what the database had at that point. tests/engine/test_schema_file.py checks that the newest
LoadSchema names the file's digest, so that an edit without its migration fails there
instead of never reaching a database that is migrated already.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from typing import Any

from django.db import migrations

SCHEMA_FILE = "sql/schema.sql"  # inside the runs package


def schema_sql() -> str:
    """The text of runs/sql/schema.sql (line ends as \\n whatever the checkout did)."""
    return resources.files("runs").joinpath(SCHEMA_FILE).read_text(encoding="utf-8")


def schema_digest(sql: str | None = None) -> str:
    """The digest a LoadSchema names: the first 16 hex digits of the text's SHA-256."""
    text = schema_sql() if sql is None else sql
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class LoadSchema(migrations.RunSQL):
    """Run runs/sql/schema.sql, if it is still the file of `digest`; else nothing.

    Every statement of the file can run again on a database that has its objects, so a
    migration that reloads it is safe on any database. The file is read when the
    migration is loaded, so `manage.py sqlmigrate` shows what it runs. Reversing it
    changes nothing: the file holds only the current definitions, not the ones before.
    """

    def __init__(self, digest: str) -> None:
        self.digest = digest
        sql = schema_sql()
        self.superseded = schema_digest(sql) != digest
        super().__init__(
            migrations.RunSQL.noop if self.superseded else sql,
            reverse_sql=migrations.RunSQL.noop,
        )

    def deconstruct(self) -> tuple[str, list[Any], dict[str, Any]]:
        return (self.__class__.__qualname__, [self.digest], {})

    def describe(self) -> str:
        if self.superseded:
            return f"Skip runs/{SCHEMA_FILE} {self.digest}: a later migration loads it as it is now"
        return f"Load runs/{SCHEMA_FILE} {self.digest}"

    @property
    def migration_name_fragment(self) -> str:
        return "load_schema"
