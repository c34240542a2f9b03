"""The two triggers that hold the step and run status edges are named for what they
guard (runs_step_status_edges, runs_run_status_edges) instead of the work that brought
them (authoring). runs/sql/schema.sql makes them under their new names; the old ones are
dropped here, before, so no update is checked twice."""

from django.db import migrations

from runs.sql.schema import LoadSchema


class Migration(migrations.Migration):
    dependencies = [("runs", "0024_current_schema")]

    operations = [
        migrations.RunSQL(
            """
            DROP TRIGGER IF EXISTS runs_step_authoring_edges ON runs_step;
            DROP FUNCTION IF EXISTS runs_step_authoring_edges();
            DROP TRIGGER IF EXISTS runs_run_authoring_edges ON runs_run;
            DROP FUNCTION IF EXISTS runs_run_authoring_edges();
            """,
            reverse_sql=migrations.RunSQL.noop,
        ),
        LoadSchema("a10b52ee619feb75"),
    ]
