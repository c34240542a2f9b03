"""runs/sql/schema.sql's heading names its loader where it now lives
(runs.sql.schema.LoadSchema, moved from runs.schema with the other database plumbing):
a comment only, reloaded so that the newest LoadSchema names the file's digest. Every
statement in the file runs again harmlessly (CREATE OR REPLACE)."""

from django.db import migrations

from runs.sql.schema import LoadSchema


class Migration(migrations.Migration):
    dependencies = [("runs", "0032_run_on_behalf_of_schedule_people")]

    operations = [LoadSchema("2dd104a6ae935a2b")]
