"""Operators' overrides of a declared concurrency limit's max, and their audit
(docs/operating.md#concurrency-limits). Operators get the admin's permissions on the
overrides (view, add, change, delete) and on their audit (view), as for the breakers."""

import django.db.models.functions.datetime
from django.db import migrations, models

from runs.migrations._grants import operators_may

GRANTS = {"limitsetting": ("view", "add", "change", "delete"), "limitchange": ("view",)}


grant, revoke = operators_may(GRANTS)


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0036_breaker'),
    ]

    operations = [
        migrations.CreateModel(
            name='LimitChange',
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
                'constraints': [models.CheckConstraint(condition=models.Q(('action__in', ['created', 'changed', 'deleted'])), name='limitchange_action_valid')],
            },
        ),
        migrations.CreateModel(
            name='LimitSetting',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('workflow', models.CharField(max_length=100)),
                ('step', models.CharField(blank=True, default='', help_text="Empty: the workflow's own limit.", max_length=100)),
                ('per', models.CharField(blank=True, default='', help_text="The limit's per= field; empty: none.", max_length=100)),
                ('max', models.PositiveIntegerField(help_text='At most this many attempts at once (>= 1).')),
                ('reason', models.TextField(help_text='Why it is overridden (kept in the audit).')),
                ('updated_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
            options={
                'ordering': ['workflow', 'step', 'per'],
                'constraints': [models.UniqueConstraint(fields=('workflow', 'step', 'per'), name='limitsetting_unique'), models.CheckConstraint(condition=models.Q(('max__gte', 1)), name='limitsetting_max_positive'), models.CheckConstraint(condition=models.Q(('reason', ''), _negated=True), name='limitsetting_reason')],
            },
        ),
        migrations.RunPython(grant, revoke),
    ]
