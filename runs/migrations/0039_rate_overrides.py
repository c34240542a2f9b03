"""Operators' overrides of a declared rate, and their audit
(docs/operating.md#concurrency-limits). Operators get the admin's permissions on the
overrides (view, add, change, delete) and on their audit (view), as for the limits."""

import django.db.models.functions.datetime
from django.db import migrations, models

from runs.migrations._grants import operators_may

GRANTS = {"ratesetting": ("view", "add", "change", "delete"), "ratechange": ("view",)}


grant, revoke = operators_may(GRANTS)


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0038_run_deadline'),
    ]

    operations = [
        migrations.CreateModel(
            name='RateChange',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('workflow', models.CharField(max_length=100)),
                ('step', models.CharField(blank=True, default='', max_length=100)),
                ('per', models.CharField(blank=True, default='', max_length=100)),
                ('action', models.CharField(max_length=8)),
                ('actor', models.CharField(max_length=150)),
                ('old', models.JSONField(blank=True, null=True)),
                ('new', models.JSONField(blank=True, null=True)),
                ('at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
            options={
                'ordering': ['-at', '-id'],
                'constraints': [models.CheckConstraint(condition=models.Q(('action__in', ['created', 'changed', 'deleted'])), name='ratechange_action_valid')],
            },
        ),
        migrations.CreateModel(
            name='RateSetting',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('workflow', models.CharField(max_length=100)),
                ('step', models.CharField(blank=True, default='', help_text="Empty: the workflow's own rate.", max_length=100)),
                ('per', models.CharField(blank=True, default='', help_text="The rate's per= field; empty: none.", max_length=100)),
                ('starts', models.PositiveIntegerField(help_text='At most this many starts (>= 1) …')),
                ('every_seconds', models.FloatField(help_text='… every this many seconds (> 0).')),
                ('reason', models.TextField(help_text='Why it is overridden (kept in the audit).')),
                ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
            options={
                'ordering': ['workflow', 'step', 'per'],
                'constraints': [models.UniqueConstraint(fields=('workflow', 'step', 'per'), name='ratesetting_unique'), models.CheckConstraint(condition=models.Q(('starts__gte', 1)), name='ratesetting_starts_positive'), models.CheckConstraint(condition=models.Q(('every_seconds__gt', 0)), name='ratesetting_every_positive'), models.CheckConstraint(condition=models.Q(('reason', ''), _negated=True), name='ratesetting_reason')],
            },
        ),
        migrations.RunPython(grant, revoke),
    ]
