-- The hand-made database objects of the runs tables: the trigger functions and triggers
-- that Django's models cannot declare, as the database has them after the newest
-- migration. Migrations load this file whole (runs.sql.schema.LoadSchema, first in
-- 0024_current_schema), so each statement must run again on a database that already
-- has its object: CREATE OR REPLACE, or DROP ... IF EXISTS then CREATE for a constraint
-- trigger, which has no OR REPLACE. Migrations 0003, 0016, 0019 and 0021 made these
-- objects one by one; they are history and stay as they were.
--
-- To change an object: edit it here and add a migration whose operation is
-- LoadSchema("<the file's new digest>"); tests/engine/test_schema_file.py prints the digest,
-- and checks that a database migrated from zero has exactly the objects of this file.
-- To remove one: delete it here and DROP it in that same migration.
--
-- Not here: indexes and constraints. Each one the tables have is declared in
-- runs/models/. The RunSQL of migrations 0010, 0017 and 0023 that drops or builds
-- indexes and keys did by hand, once, what the model state says (where Django's own
-- operations would have rebuilt more); a one-time change stays in its migration.
--
-- A reload replaces the functions in place and recreates the triggers, which blocks
-- writes to runs_event, runs_step and runs_run, and any use of runs_claim (its
-- constraint trigger is dropped and made again), until its migration commits: give it
-- a migration of its own.


-- The event log is append-only: a run's history must stay the record the rows are
-- checked against. UPDATE is always refused. DELETE is refused unless the transaction
-- said `SET LOCAL durable_runs.retention = 'on'`, which only the retention job does.
-- TRUNCATE is not a row operation and stays available to test tear-down.
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

CREATE OR REPLACE TRIGGER runs_event_append_only
    BEFORE UPDATE OR DELETE ON runs_event
    FOR EACH ROW EXECUTE FUNCTION runs_event_append_only();


-- A resolution, once recorded, is final: an operator's decision about an effect whose
-- outcome was unknown must not be rewritten by any later code path. A resolved claim
-- (resolved_at set) cannot be updated at all; deleting it (retention) stays possible.
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

CREATE OR REPLACE TRIGGER runs_claim_resolution_final
    BEFORE UPDATE ON runs_claim
    FOR EACH ROW EXECUTE FUNCTION runs_claim_resolution_final();


-- The step edges that the engine's conditional UPDATEs take, enforced for every writer
-- (a hand-written UPDATE included): only a pending step is skipped, and skipped is
-- final; only a queued step starts waiting, and a waiting step only goes back to queued.
CREATE OR REPLACE FUNCTION runs_step_status_edges() RETURNS trigger AS $$
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

CREATE OR REPLACE TRIGGER runs_step_status_edges
    BEFORE UPDATE OF status ON runs_step
    FOR EACH ROW EXECUTE FUNCTION runs_step_status_edges();


-- The run edges into and out of `waiting` and `compensating`, for every writer:
-- - waiting is entered from running or needs_reconciliation, or from failed when an
--   operator retries a run one of whose branches still waits; it is left for running,
--   needs_reconciliation, compensating, cancelled or failed;
-- - any run but a succeeded one may start compensating: an unfinished one, or a
--   cancelled or failed one in which a step turned out to have succeeded after the run
--   stopped (its effect must be compensated too);
-- - a compensating run only ends cancelled or failed.
CREATE OR REPLACE FUNCTION runs_run_status_edges() RETURNS trigger AS $$
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

CREATE OR REPLACE TRIGGER runs_run_status_edges
    BEFORE UPDATE OF status ON runs_run
    FOR EACH ROW EXECUTE FUNCTION runs_run_status_edges();


-- A map item's fence, checked as its transaction commits: the item's claim is inserted
-- already succeeded, and the commit goes through only if the batch's attempt still runs
-- under a lease that has not expired on the database's clock. The attempt is
-- share-locked until the commit ends, so it cannot be taken over meanwhile. Otherwise
-- the commit fails with SQLSTATE DR001 and the item rolls back, effect included
-- (runs/engine/mapping.py raises AttemptFenced). Checking at COMMIT is as late as the
-- check can be, and costs no statement of its own. A transaction that nests the item
-- runs the check at once with SET CONSTRAINTS runs_claim_item_fence IMMEDIATE.
CREATE OR REPLACE FUNCTION runs_claim_item_fence() RETURNS trigger LANGUAGE plpgsql AS $$
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

-- A constraint trigger, so that it can be deferred to COMMIT; PostgreSQL has no
-- CREATE OR REPLACE for those.
DROP TRIGGER IF EXISTS runs_claim_item_fence ON runs_claim;
CREATE CONSTRAINT TRIGGER runs_claim_item_fence
    AFTER INSERT ON runs_claim
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW
    WHEN (NEW.item_key IS NOT NULL AND NEW.status = 'succeeded' AND NEW.attempt_id IS NOT NULL)
    EXECUTE FUNCTION runs_claim_item_fence();
