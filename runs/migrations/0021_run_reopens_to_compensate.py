"""Two ways back into a run that ended, which the transition trigger of migration 0016
refused:
- cancelled | failed -> compensating: a step of its plan turned out to have succeeded
  after it stopped (a running attempt that finished late, or an unresolved claim
  resolved as succeeded), so its compensation must run too (runs/engine/compensate.py);
- failed -> waiting: an operator retries a failed run one of whose branches still waits
  for a signal or a time (runs/engine/operate.py)."""

from django.db import migrations

FORWARD = r"""
CREATE OR REPLACE FUNCTION runs_run_authoring_edges() RETURNS trigger AS $$
BEGIN
    IF NEW.status = OLD.status THEN
        RETURN NEW;
    END IF;
    IF (NEW.status = 'waiting' AND OLD.status NOT IN ('running', 'needs_reconciliation', 'failed'))
       OR (OLD.status = 'waiting' AND NEW.status NOT IN
           ('running', 'needs_reconciliation', 'compensating', 'cancelled', 'failed'))
       OR (NEW.status = 'compensating' AND OLD.status = 'succeeded')
       OR (OLD.status = 'compensating' AND NEW.status NOT IN ('cancelled', 'failed')) THEN
        RAISE EXCEPTION 'run % cannot go from % to %', OLD.id, OLD.status, NEW.status
            USING ERRCODE = 'check_violation';
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql;
"""

BACKWARD = r"""
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
"""


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0020_guarded_entry_and_probe_lease"),
    ]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
