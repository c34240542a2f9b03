"""History is append-only (docs/architecture.md#history-and-restore), and a resolution, once recorded, is final.

- runs_event: UPDATE is always rejected; DELETE only inside a transaction that set
  `SET LOCAL durable_runs.retention = 'on'` (the retention job). TRUNCATE is not a row
  operation and stays available to test tear-down.
- runs_claim: a row whose resolution is recorded (resolved_at set) cannot be updated,
  and resolution fields cannot be written except together with resolved_at.
"""

from django.db import migrations

FORWARD = r"""
CREATE OR REPLACE FUNCTION runs_event_append_only() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        RAISE EXCEPTION 'runs_event is append-only: UPDATE of event % rejected', OLD.id
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    IF coalesce(current_setting('durable_runs.retention', true), '') <> 'on' THEN
        RAISE EXCEPTION 'runs_event is append-only: DELETE outside retention rejected'
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN OLD;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER runs_event_append_only
    BEFORE UPDATE OR DELETE ON runs_event
    FOR EACH ROW EXECUTE FUNCTION runs_event_append_only();

CREATE OR REPLACE FUNCTION runs_claim_resolution_final() RETURNS trigger AS $$
BEGIN
    IF OLD.resolved_at IS NOT NULL THEN
        RAISE EXCEPTION 'claim % was resolved by % at %; a resolution cannot be changed',
            OLD.key, OLD.resolved_by, OLD.resolved_at
            USING ERRCODE = 'integrity_constraint_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;

CREATE TRIGGER runs_claim_resolution_final
    BEFORE UPDATE ON runs_claim
    FOR EACH ROW EXECUTE FUNCTION runs_claim_resolution_final();
"""

BACKWARD = r"""
DROP TRIGGER IF EXISTS runs_event_append_only ON runs_event;
DROP FUNCTION IF EXISTS runs_event_append_only();
DROP TRIGGER IF EXISTS runs_claim_resolution_final ON runs_claim;
DROP FUNCTION IF EXISTS runs_claim_resolution_final();
"""


class Migration(migrations.Migration):
    dependencies = [("runs", "0002_claim_generation_and_probes")]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
