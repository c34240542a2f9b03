"""A map step's batches by a partial index on parent_id (WHERE parent_id IS NOT NULL)
instead of the foreign key's full one: every step of the plan has no parent, and each
of the three writes of its row per attempt added an entry to the full index for nothing
(docs/performance.md#halving-a-steps-cpu-issue-40).

The new index is built CONCURRENTLY before the old one goes (so the migration is not
atomic), as 0041_event_claim_decision_idx does: runs_step is written on every step.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0043_sign_in_identity"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="step",
            index=models.Index(
                condition=models.Q(("parent__isnull", False)),
                fields=["parent"],
                name="step_batches_idx",
            ),
        ),
        migrations.AlterField(
            model_name="step",
            name="parent",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=models.deletion.CASCADE,
                related_name="batches",
                to="runs.step",
            ),
        ),
    ]
