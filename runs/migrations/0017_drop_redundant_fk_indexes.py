"""Drop the foreign-key indexes that another index already serves: each
step write (queued, started, finished) is a non-HOT update that inserts into every
index of runs_step, each attempt and claim insert into every index of theirs.

- runs_step.run_id: step_run_key_unique (run_id, key) serves every lookup by run;
- runs_step.current_attempt_id: never looked up (read with its step only);
- runs_attempt.step_id: attempt_step_number_unique (step_id, number);
- runs_claim.step_id: claim_step_status_idx (step_id, status);
- runs_claim.attempt_id: never looked up (attempts are never deleted, their runs keep
  their append-only log; reads go from the claim to its attempt).

Only the indexes go: the model state says db_index=False, the database drops exactly
these (an AlterField would also drop and re-validate the foreign keys, and take the
partial unique index attempt_one_running_per_step with them)."""

import django.db.models.deletion
from django.db import migrations, models

INDEXES = [
    ("runs_step", "run_id", "runs_step_run_id_2764751d"),
    ("runs_step", "current_attempt_id", "runs_step_current_attempt_id_0c6ded6a"),
    ("runs_attempt", "step_id", "runs_attempt_step_id_8945e7f8"),
    ("runs_claim", "step_id", "runs_claim_step_id_ba444dad"),
    ("runs_claim", "attempt_id", "runs_claim_attempt_id_aaf1ba5b"),
]


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0016_authoring_waits_signals_skips"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    f'DROP INDEX IF EXISTS "{name}"',
                    reverse_sql=f'CREATE INDEX IF NOT EXISTS "{name}" ON "{table}" ("{column}")',
                )
                for table, column, name in INDEXES
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="attempt",
                    name="step",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="attempt_set",
                        to="runs.step",
                    ),
                ),
                migrations.AlterField(
                    model_name="claim",
                    name="step",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="claims",
                        to="runs.step",
                    ),
                ),
                migrations.AlterField(
                    model_name="claim",
                    name="attempt",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="claims",
                        to="runs.attempt",
                    ),
                ),
                migrations.AlterField(
                    model_name="step",
                    name="current_attempt",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to="runs.attempt",
                    ),
                ),
                migrations.AlterField(
                    model_name="step",
                    name="run",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="steps",
                        to="runs.run",
                    ),
                ),
            ],
        ),
    ]
