"""Step.held_at: when a pause turned the step's delivery away, so that a resume sends
again only the steps whose message a pause took off the broker, not those whose message
is still queued (runs/engine/policies/pauses.py). Nullable, no default: adding it
rewrites nothing."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0030_step_message_due_at")]

    operations = [
        migrations.AddField(
            model_name="step",
            name="held_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
