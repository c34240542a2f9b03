"""Claim.unresolved_at: when a claim became unresolved, so the operator queue orders
by (and shows) how long a decision has been waiting, from an index.

Claims unresolved before this migration get the time of their `claim_unresolved`
event (their creation time if that event is gone). Resolved claims are left NULL: a
resolution is final, and a trigger (0003) rejects any update of a resolved claim.
"""

from django.db import migrations, models

BACKFILL = r"""
UPDATE runs_claim AS c
SET unresolved_at = coalesce(
    (SELECT max(e.created_at) FROM runs_event AS e
     WHERE e.run_id = c.run_id AND e.type = 'claim_unresolved' AND e.payload->>'key' = c.key),
    c.created_at)
WHERE c.status = 'unresolved' AND c.unresolved_at IS NULL
"""


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0004_review_statuses_deferrals_probe_after'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='claim',
            name='claim_unresolved_idx',
        ),
        migrations.AddField(
            model_name='claim',
            name='unresolved_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
        migrations.AddIndex(
            model_name='claim',
            index=models.Index(condition=models.Q(('status', 'unresolved')), fields=['unresolved_at', 'id'], name='claim_unresolved_idx'),
        ),
        migrations.AddIndex(
            model_name='claim',
            index=models.Index(condition=models.Q(('resolved_at__isnull', False)), fields=['-resolved_at', '-id'], name='claim_resolved_idx'),
        ),
        migrations.AddConstraint(
            model_name='claim',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status', 'unresolved'), _negated=True), ('unresolved_at__isnull', False), _connector='OR'), name='claim_unresolved_since_known'),
        ),
    ]
