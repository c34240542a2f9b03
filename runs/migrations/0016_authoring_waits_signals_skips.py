"""Authoring: run statuses `waiting` and `compensating`, step statuses
`waiting` and `skipped`, the step's timer (`wake_at`), the Signal table, and for
compensation the run's `ends_as` and the step's `compensates`.

The new edges of docs/architecture.md#state-machines are also enforced by a trigger, so that no code path
(nor a hand-written UPDATE) can enter or leave them any other way:
- step: only pending -> skipped (and skipped is final); only queued -> waiting; a
  waiting step only goes back to queued.
- run: only running|needs_reconciliation -> waiting; a waiting run goes back to
  running, or to needs_reconciliation, compensating, cancelled, failed; only an
  unfinished run becomes compensating (or a failed one whose failed compensation is
  retried), and a compensating run only ends cancelled or failed.
"""

import django.db.models.deletion
import django.db.models.functions.datetime
from django.db import migrations, models


FORWARD = r"""
CREATE OR REPLACE FUNCTION runs_step_authoring_edges() RETURNS trigger AS $$
BEGIN
    IF NEW.status = OLD.status THEN
        RETURN NEW;
    END IF;
    IF (NEW.status = 'skipped' AND OLD.status <> 'pending')
       OR OLD.status = 'skipped'
       OR (NEW.status = 'waiting' AND OLD.status <> 'queued')
       OR (OLD.status = 'waiting' AND NEW.status <> 'queued') THEN
        RAISE EXCEPTION 'step % cannot go from % to %', OLD.key, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER runs_step_authoring_edges
    BEFORE UPDATE OF status ON runs_step
    FOR EACH ROW EXECUTE FUNCTION runs_step_authoring_edges();

CREATE OR REPLACE FUNCTION runs_run_authoring_edges() RETURNS trigger AS $$
BEGIN
    IF NEW.status = OLD.status THEN
        RETURN NEW;
    END IF;
    IF (NEW.status = 'waiting' AND OLD.status NOT IN ('running', 'needs_reconciliation'))
       OR (OLD.status = 'waiting' AND NEW.status NOT IN
           ('running', 'needs_reconciliation', 'compensating', 'cancelled', 'failed'))
       OR (NEW.status = 'compensating' AND OLD.status IN ('succeeded', 'cancelled'))
       OR (OLD.status = 'compensating' AND NEW.status NOT IN ('cancelled', 'failed')) THEN
        RAISE EXCEPTION 'run % cannot go from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER runs_run_authoring_edges
    BEFORE UPDATE OF status ON runs_run
    FOR EACH ROW EXECUTE FUNCTION runs_run_authoring_edges();
"""

BACKWARD = r"""
DROP TRIGGER IF EXISTS runs_step_authoring_edges ON runs_step;
DROP FUNCTION IF EXISTS runs_step_authoring_edges();
DROP TRIGGER IF EXISTS runs_run_authoring_edges ON runs_run;
DROP FUNCTION IF EXISTS runs_run_authoring_edges();
"""


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0015_schedule_operators'),
    ]

    operations = [
        migrations.CreateModel(
            name='Signal',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=100)),
                ('payload', models.JSONField(blank=True, null=True)),
                ('actor', models.CharField(max_length=150)),
                ('on_duplicate', models.CharField(max_length=8)),
                ('created_at', models.DateTimeField(db_default=django.db.models.functions.datetime.Now())),
                ('consumed_at', models.DateTimeField(blank=True, null=True)),
            ],
            options={
                'ordering': ['run_id', 'id'],
            },
        ),
        migrations.RemoveConstraint(
            model_name='run',
            name='run_status_valid',
        ),
        migrations.RemoveConstraint(
            model_name='run',
            name='run_finished_at_iff_finished',
        ),
        migrations.RemoveConstraint(
            model_name='step',
            name='step_status_valid',
        ),
        migrations.AddField(
            model_name='step',
            name='wake_at',
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name='run',
            name='status',
            field=models.CharField(choices=[('pending', 'Pending'), ('running', 'Running'), ('waiting', 'Waiting'), ('needs_reconciliation', 'Needs Reconciliation'), ('compensating', 'Compensating'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='pending', max_length=24),
        ),
        migrations.AlterField(
            model_name='step',
            name='status',
            field=models.CharField(choices=[('pending', 'Pending'), ('queued', 'Queued'), ('waiting', 'Waiting'), ('running', 'Running'), ('retrying', 'Retrying'), ('unresolved', 'Unresolved'), ('succeeded', 'Succeeded'), ('failed', 'Failed'), ('skipped', 'Skipped')], default='pending', max_length=16),
        ),
        migrations.AddIndex(
            model_name='step',
            index=models.Index(condition=models.Q(('status', 'waiting'), ('wake_at__isnull', False)), fields=['wake_at'], name='step_timer_idx'),
        ),
        migrations.AddConstraint(
            model_name='run',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'running', 'waiting', 'needs_reconciliation', 'compensating', 'succeeded', 'failed', 'cancelled'])), name='run_status_valid'),
        ),
        migrations.AddConstraint(
            model_name='run',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('finished_at__isnull', True), ('status__in', ['pending', 'running', 'waiting', 'needs_reconciliation', 'compensating'])), models.Q(('finished_at__isnull', False), ('status__in', ['succeeded', 'failed', 'cancelled'])), _connector='OR'), name='run_finished_at_iff_finished'),
        ),
        migrations.AddConstraint(
            model_name='step',
            constraint=models.CheckConstraint(condition=models.Q(('status__in', ['pending', 'queued', 'waiting', 'running', 'retrying', 'unresolved', 'succeeded', 'failed', 'skipped'])), name='step_status_valid'),
        ),
        migrations.AddField(
            model_name='signal',
            name='consumed_by_step',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='runs.step'),
        ),
        migrations.AddField(
            model_name='signal',
            name='run',
            field=models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='signals', to='runs.run'),
        ),
        migrations.AddIndex(
            model_name='signal',
            index=models.Index(fields=['run', 'name', 'id'], name='signal_run_name_idx'),
        ),
        migrations.AddConstraint(
            model_name='signal',
            constraint=models.UniqueConstraint(condition=models.Q(('on_duplicate', 'refuse')), fields=('run', 'name'), name='signal_one_per_name_when_refused'),
        ),
        migrations.AddConstraint(
            model_name='signal',
            constraint=models.CheckConstraint(condition=models.Q(('on_duplicate__in', ['refuse', 'queue'])), name='signal_on_duplicate_valid'),
        ),
        migrations.AddConstraint(
            model_name='signal',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('consumed_at__isnull', True), ('consumed_by_step__isnull', True)), models.Q(('consumed_at__isnull', False), ('consumed_by_step__isnull', False)), _connector='OR'), name='signal_consumed_at_iff_consumed'),
        ),
            migrations.AddField(
            model_name='run',
            name='ends_as',
            field=models.CharField(blank=True, default='', max_length=16),
        ),
        migrations.AddField(
            model_name='step',
            name='compensates',
            field=models.CharField(blank=True, default='', max_length=100),
        ),
        migrations.AddConstraint(
            model_name='run',
            constraint=models.CheckConstraint(condition=models.Q(models.Q(('status', 'compensating'), _negated=True), ('ends_as__in', ['cancelled', 'failed']), _connector='OR'), name='run_compensating_knows_its_end'),
        ),
        migrations.RunSQL(FORWARD, BACKWARD),
    ]
