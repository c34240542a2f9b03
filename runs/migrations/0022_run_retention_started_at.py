"""Run.retention_started_at: set by the first retention stage that touches a run, in
its transaction; a retry refuses a run that has it (runs/engine/operate.py). Runs that
retention touched before it existed get it from the marks those stages left (a map
registry, compacted payloads or events, purged claims)."""

from django.db import migrations, models

BACKFILL = r"""
UPDATE runs_run r SET retention_started_at = least(
    r.payloads_compacted_at, r.compacted_at, r.claims_purged_at,
    (SELECT min(m.updated_at) FROM runs_mapregistry m WHERE m.run_id = r.id))
WHERE r.payloads_compacted_at IS NOT NULL OR r.compacted_at IS NOT NULL
   OR r.claims_purged_at IS NOT NULL
   OR EXISTS (SELECT 1 FROM runs_mapregistry m WHERE m.run_id = r.id)
"""


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0021_run_reopens_to_compensate"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="retention_started_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
