"""Resolve batches (docs/operating.md#decide-all-matching): a batch may resolve every
unresolved claim a queue filter matched, each item naming its claim; an item may end
set aside (decided one by one, never in bulk), counted like the other outcomes."""

import django.db.models.deletion
import django.db.models.expressions
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0039_rate_overrides'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='batch',
            name='batch_operation_valid',
        ),
        migrations.RemoveConstraint(
            model_name='batch',
            name='batch_counts_add_up',
        ),
        migrations.RemoveConstraint(
            model_name='batchitem',
            name='batchitem_batch_run_unique',
        ),
        migrations.RemoveConstraint(
            model_name='batchitem',
            name='batchitem_status_valid',
        ),
        migrations.AddField(
            model_name='batch',
            name='outcome',
            field=models.CharField(blank=True, default='', max_length=16),
        ),
        migrations.AddField(
            model_name='batch',
            name='set_aside',
            field=models.PositiveIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='batchitem',
            name='claim',
            field=models.ForeignKey(null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.claim'),
        ),
        migrations.AlterField(
            model_name='batch',
            name='operation',
            field=models.CharField(choices=[('cancel', 'Cancel'), ('retry', 'Retry'), ('resolve', 'Resolve')], max_length=16),
        ),
        migrations.AlterField(
            model_name='batchitem',
            name='status',
            field=models.CharField(choices=[('pending', 'Pending'), ('applied', 'Applied'), ('refused', 'Refused'), ('failed', 'Failed'), ('set_aside', 'Set Aside')], default='pending', max_length=16),
        ),
        migrations.AddConstraint(
            model_name='batch',
            constraint=models.CheckConstraint(condition=models.Q(('operation__in', ['cancel', 'retry', 'resolve'])), name='batch_operation_valid'),
        ),
        migrations.AddConstraint(
            model_name='batch',
            constraint=models.CheckConstraint(condition=models.Q(('done', django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(django.db.models.expressions.CombinedExpression(models.F('applied'), '+', models.F('refused')), '+', models.F('failed')), '+', models.F('set_aside'))), ('done__lte', models.F('total'))), name='batch_counts_add_up'),
        ),
        migrations.AddConstraint(
            model_name='batch',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('operation', 'resolve'), ('outcome__in', ['succeeded', 'failed'])), models.Q(models.Q(('operation', 'resolve'), _negated=True), ('outcome', '')), _connector='OR'), name='batch_outcome_iff_resolve'),
        ),
        migrations.AddConstraint(
            model_name='batchitem',
            constraint=models.UniqueConstraint(condition=models.Q(('claim__isnull', True)), fields=('batch', 'run'), name='batchitem_batch_run_unique'),
        ),
        migrations.AddConstraint(
            model_name='batchitem',
            constraint=models.UniqueConstraint(condition=models.Q(('claim__isnull', False)), fields=('batch', 'claim'), name='batchitem_batch_claim_unique'),
        ),
        migrations.AddConstraint(
            model_name='batchitem',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'applied', 'refused', 'failed', 'set_aside'])), name='batchitem_status_valid'),
        ),
    ]
