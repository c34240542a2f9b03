"""The hand-made database objects (trigger functions and triggers) from runs/sql/schema.sql
from now on: the file holds their current definitions, the same ones that 0003, 0016,
0019 and 0021 left, so on a database migrated before this one the functions are
replaced by themselves and the triggers made again as they were. A later change to one
of them edits the file and adds a migration like this one with the file's new digest
(runs/sql/schema.py)."""

from django.db import migrations

from runs.sql.schema import LoadSchema


class Migration(migrations.Migration):
    dependencies = [("runs", "0023_principals")]

    operations = [LoadSchema("e9e377a4d668e8cd")]
