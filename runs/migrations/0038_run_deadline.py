"""Run.deadline_at: past it no step of the run starts, and the sweeper ends the run as a
cancel would (runs/engine/policies/deadlines.py). Nullable, no default: adding it
rewrites nothing. Its partial index (runs with a deadline, not finished) is what the
sweep reads; it is built CONCURRENTLY (so the migration is not atomic): runs_run is
updated by every step's start and finish, and a plain CREATE INDEX would hold them
for as long as the build scans the table.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0037_limit_overrides"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="deadline_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(
                condition=models.Q(("deadline_at__isnull", False), ("finished_at__isnull", True)),
                fields=["deadline_at"],
                name="run_deadline_idx",
            ),
        ),
    ]
