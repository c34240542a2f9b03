"""Step.message_due_at: when a step's newest message is due, if it went out with a
countdown (a resume's spread, runs/engine/policies/pauses.py); the sweeper does not
republish the step before then (runs/engine/policies/recover.py, republish_stale).
Nullable, no default: adding it rewrites nothing."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0029_search_fields")]

    operations = [
        migrations.AddField(
            model_name="step",
            name="message_due_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
