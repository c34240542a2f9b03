"""A run's steps of the plan by name, as a partial index (parent_id IS NULL): every
lookup by (run, name) is of top-level steps, and with only the full index the generic
plans of the engine's prepared statements (runs/sql/prepared.py) chose a BitmapAnd with the
parent_id index, reading every top-level step of the table per step.
The new index is built before the old one goes, so lookups always have one."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0017_drop_redundant_fk_indexes"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="step",
            index=models.Index(
                condition=models.Q(("parent__isnull", True)),
                fields=["run", "name"],
                name="step_top_run_name_idx",
            ),
        ),
        migrations.RemoveIndex(
            model_name="step",
            name="step_run_name_idx",
        ),
    ]
