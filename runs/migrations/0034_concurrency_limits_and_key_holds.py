"""Concurrency limits and key holds (docs/authoring.md#limits-and-holds): the slots
table, the step's waiting scope and the claim's hold key. The columns have constant
defaults (no table rewrite); the two partial indexes on the hot tables are built
concurrently (so not in one transaction) and are empty until a limit or hold is used."""

import django.db.models.deletion
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('runs', '0033_reload_schema_after_the_floor_plan'),
    ]

    operations = [
        migrations.CreateModel(
            name='Slot',
            fields=[
                ('id', models.BigAutoField(primary_key=True, serialize=False)),
                ('scope', models.TextField()),
                ('n', models.IntegerField()),
                ('step_id', models.BigIntegerField()),
                ('taken_at', models.DateTimeField()),
            ],
            options={
                'ordering': ['scope', 'n'],
            },
        ),
        migrations.AddField(
            model_name='claim',
            name='hold_key',
            field=models.TextField(blank=True, db_default='', default=''),
        ),
        migrations.AddField(
            model_name='step',
            name='waiting_for',
            field=models.TextField(blank=True, db_default='', default=''),
        ),
        AddIndexConcurrently(
            model_name='claim',
            index=models.Index(condition=models.Q(('status', 'unresolved'), models.Q(('hold_key', ''), _negated=True)), fields=['hold_key'], name='claim_hold_idx'),
        ),
        AddIndexConcurrently(
            model_name='step',
            index=models.Index(condition=models.Q(('waiting_for', ''), _negated=True), fields=['waiting_for', 'queued_at', 'id'], name='step_waiting_for_idx'),
        ),
        migrations.AddField(
            model_name='slot',
            name='attempt',
            field=models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.attempt'),
        ),
        migrations.AddIndex(
            model_name='slot',
            index=models.Index(fields=['attempt'], name='slot_attempt_idx'),
        ),
        migrations.AddConstraint(
            model_name='slot',
            constraint=models.UniqueConstraint(fields=('scope', 'n'), name='slot_scope_n_unique'),
        ),
        migrations.AddConstraint(
            model_name='slot',
            constraint=models.CheckConstraint(condition=models.Q(('n__gte', 0)), name='slot_n_not_negative'),
        ),
    ]
