"""Tracing (docs/operating.md#tracing): the run's traceparent, and each attempt's span id.

Both are added without a rewrite of the table: runs_run's with a constant default, and
runs_attempt's nullable (NULL while tracing is off, so the hot INSERT writes nothing
more then)."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0041_event_claim_decision_idx'),
    ]

    operations = [
        migrations.AddField(
            model_name='attempt',
            name='span_id',
            field=models.CharField(blank=True, max_length=16, null=True),
        ),
        migrations.AddField(
            model_name='run',
            name='traceparent',
            field=models.CharField(blank=True, db_default='', default='', max_length=55),
        ),
    ]
