"""Accounts linked to a single sign-on provider's (issuer, subject)
(runs/models/identities.py, docs/operating.md#single-sign-on). A new, empty table."""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0042_run_traceparent_attempt_span"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.CreateModel(
            name="SignInIdentity",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("issuer", models.CharField(max_length=500)),
                ("subject", models.CharField(max_length=255)),
                ("created_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ("last_sign_in_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                (
                    "user",
                    models.OneToOneField(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="sign_in_identity",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(fields=("issuer", "subject"), name="sign_in_identity_unique")
                ],
            },
        ),
    ]
