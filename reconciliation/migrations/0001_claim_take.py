"""ClaimTake: who is on an unresolved claim, until when (reconciliation/models.py)."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('runs', '0005_claim_unresolved_at'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name='ClaimTake',
            fields=[
                ('claim', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name='take', serialize=False, to='runs.claim')),
                ('taken_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('expires_at', models.DateTimeField()),
                ('taken_by', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='claim_takes', to=settings.AUTH_USER_MODEL)),
            ],
            options={
                'constraints': [models.CheckConstraint(condition=models.Q(('expires_at__gt', models.F('taken_at'))), name='claimtake_expires_after_taken')],
            },
        ),
    ]
