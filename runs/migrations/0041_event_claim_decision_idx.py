"""The decision reports' index (runs/reads/decisions.py): the claim_unresolved and
claim_resolved events by created_at, partial, with type and run_id included so that
counting the claims unresolved before a period reads the index alone.

Built CONCURRENTLY (so the migration is not atomic), as 0010_page_indexes does:
runs_event is the table every step transition inserts into, and a plain CREATE INDEX
would hold those inserts for as long as the build takes.
"""

from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ("runs", "0040_resolve_batches"),
    ]

    operations = [
        AddIndexConcurrently(
            model_name="event",
            index=models.Index(
                condition=models.Q(("type__in", ["claim_unresolved", "claim_resolved"])),
                fields=["created_at"],
                include=["type", "run"],
                name="event_claim_decision_idx",
            ),
        ),
    ]
