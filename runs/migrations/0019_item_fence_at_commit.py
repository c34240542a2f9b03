"""A map item's fence at its commit: a deferred constraint trigger on the
item's claim (inserted already `succeeded`, mapping.py) checks, as the transaction
commits, that the batch's attempt still runs under a live lease on the database's
clock, and share-locks it until the commit ends; otherwise the commit fails with
SQLSTATE DR001 and the item, effect included, rolls back (mapping.py raises
AttemptFenced). It is the fence statement the engine sent last in every item's
transaction, moved into the COMMIT itself: one round trip less per item, and the check
as late as it can be. A transaction that nests the item (a test's) checks it at once
(SET CONSTRAINTS ... IMMEDIATE) as well as with the explicit fence."""

from django.db import migrations

FORWARD = """
CREATE FUNCTION runs_claim_item_fence() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM runs_attempt
     WHERE id = NEW.attempt_id AND status = 'running'
       AND lease_expires_at > statement_timestamp()
       FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'attempt % no longer holds its lease: item claim % not committed',
            NEW.attempt_id, NEW.key
            USING ERRCODE = 'DR001';
    END IF;
    RETURN NULL;
END $$;

CREATE CONSTRAINT TRIGGER runs_claim_item_fence
    AFTER INSERT ON runs_claim
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (NEW.item_key IS NOT NULL AND NEW.status = 'succeeded' AND NEW.attempt_id IS NOT NULL)
    EXECUTE FUNCTION runs_claim_item_fence();
"""

BACKWARD = """
DROP TRIGGER IF EXISTS runs_claim_item_fence ON runs_claim;
DROP FUNCTION IF EXISTS runs_claim_item_fence();
"""


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0018_top_level_steps_by_name"),
    ]

    operations = [migrations.RunSQL(FORWARD, BACKWARD)]
