"""Indexes behind every filter of the runs list, in the list's own order, one for the
run page's event log by type and one for a run's step claims (runs/models.py says
which query each serves).

Built and dropped CONCURRENTLY (so the migration is not atomic): runs_event is the
table every step transition inserts into, and a plain CREATE INDEX would hold those
inserts for as long as the build takes. New indexes first, then the ones they replace.
The event log's single-column run index goes: (run, seq) and (run, type, seq) both
lead with run, and each event insert would otherwise maintain three. Only the index
goes, not the foreign key (AlterField would drop and re-validate it, scanning the log).
"""

from django.contrib.postgres.operations import AddIndexConcurrently, RemoveIndexConcurrently
from django.db import migrations, models
import django.db.models.deletion

# Django's name for the index of runs_event.run_id (0001_initial): the same everywhere.
EVENT_RUN_INDEX = "runs_event_run_id_9278d2f7"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0009_browse_indexes"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(fields=["status", "-created_at", "-id"], name="run_status_newest_idx"),
        ),
        AddIndexConcurrently(
            model_name="run",
            index=models.Index(fields=["workflow", "-created_at", "-id"], name="run_workflow_newest_idx"),
        ),
        AddIndexConcurrently(
            model_name="event",
            index=models.Index(fields=["run", "type", "seq"], name="event_run_type_idx"),
        ),
        AddIndexConcurrently(
            model_name="claim",
            index=models.Index(
                condition=models.Q(("item_key__isnull", True)), fields=["run"], name="claim_run_steps_idx"
            ),
        ),
        RemoveIndexConcurrently(model_name="run", name="run_status_created_idx"),
        RemoveIndexConcurrently(model_name="run", name="run_workflow_created_idx"),
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX CONCURRENTLY IF EXISTS "{EVENT_RUN_INDEX}"',
                    f'CREATE INDEX CONCURRENTLY IF NOT EXISTS "{EVENT_RUN_INDEX}" '
                    'ON "runs_event" ("run_id")',
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="event",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="events",
                        to="runs.run",
                    ),
                ),
            ],
        ),
    ]
