"""WebhookDelivery: the webhook outbox (reconciliation/models.py, docs/operating.md#webhook)."""

import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('reconciliation', '0001_claim_take'),
    ]

    operations = [
        migrations.CreateModel(
            name='WebhookDelivery',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('event', models.CharField(choices=[('claim_unresolved', 'Claim Unresolved'), ('claim_stale', 'Claim Stale')], max_length=32)),
                ('claim_id', models.BigIntegerField()),
                ('payload', models.JSONField()),
                ('status', models.CharField(choices=[('pending', 'Pending'), ('delivered', 'Delivered'), ('failed', 'Failed')], default='pending', max_length=16)),
                ('tries', models.PositiveIntegerField(default=0)),
                ('next_attempt_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('delivered_at', models.DateTimeField(blank=True, null=True)),
                ('last_error', models.TextField(blank=True, default='')),
                ('history', models.JSONField(blank=True, default=list)),
            ],
            options={
                'verbose_name_plural': 'webhook deliveries',
                'ordering': ['-created_at', '-id'],
                'indexes': [models.Index(condition=models.Q(('status', 'pending')), fields=['next_attempt_at', 'id'], name='webhook_pending_idx')],
                'constraints': [models.UniqueConstraint(fields=('claim_id', 'event'), name='webhookdelivery_once_per_claim'), models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'delivered', 'failed'])), name='webhookdelivery_status_valid'), models.CheckConstraint(condition=models.Q(('event__in', ['claim_unresolved', 'claim_stale'])), name='webhookdelivery_event_valid'), models.CheckConstraint(condition=models.Q(models.Q(('delivered_at__isnull', False), ('status', 'delivered')), models.Q(models.Q(('status', 'delivered'), _negated=True), ('delivered_at__isnull', True)), _connector='OR'), name='webhookdelivery_delivered_at')],
            },
        ),
    ]
