import django.contrib.postgres.fields
import django.db.models.functions.datetime
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0027_batches"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkerProcess",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("name", models.CharField(max_length=200, unique=True)),
                ("host", models.CharField(max_length=200)),
                ("pid", models.PositiveIntegerField()),
                (
                    "pool_pids",
                    django.contrib.postgres.fields.ArrayField(
                        base_field=models.PositiveIntegerField(), blank=True, default=list, size=None
                    ),
                ),
                ("concurrency", models.PositiveIntegerField(default=1)),
                ("started_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ("heartbeat_at", models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
            ],
            options={
                "ordering": ["name"],
            },
        ),
    ]
