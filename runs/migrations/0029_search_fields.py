"""Search keys (runs/workflows/search.py): the values of a workflow's declared search
fields, one row per run and field, found by runsearchkey_value_idx
(docs/operating.md#finding-a-run)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0028_workers")]

    operations = [
        migrations.CreateModel(
            name="RunSearchKey",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("workflow", models.CharField(max_length=100)),
                ("field", models.CharField(max_length=100)),
                ("value", models.CharField(max_length=200)),
                ("created_at", models.DateTimeField()),
                (
                    "run",
                    models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="search_keys",
                        to="runs.run",
                    ),
                ),
            ],
            options={
                "indexes": [
                    models.Index(
                        fields=["field", "value", "-created_at", "-run"],
                        name="runsearchkey_value_idx",
                    )
                ],
                "constraints": [
                    models.UniqueConstraint(
                        fields=("run", "field"), name="runsearchkey_run_field_unique"
                    )
                ],
            },
        ),
    ]
