-- Submissions (submit.py). Parameters only.

-- name: claim_key
-- Insert the key for the run about to be created (the foreign key is checked at
-- commit); no row if the key exists. A concurrent insert of the same key makes this
-- statement wait for that transaction: then it sees the committed key, or inserts its
-- own if the other rolled back.
    INSERT INTO runs_submissionkey (scope, key, run_id, request_digest, created_at)
    VALUES (%(scope)s, %(key)s, %(run)s, %(digest)s, now())
    ON CONFLICT (scope, key) DO NOTHING
    RETURNING key

-- name: insert_search_keys
-- The run's search keys (runs/workflows/search.py), in its submission transaction: one
-- statement for all of them, the run's workflow and created_at copied from its row.
    INSERT INTO runs_runsearchkey (run_id, workflow, field, value, created_at)
    SELECT r.id, r.workflow, k.field, k.value, r.created_at
    FROM runs_run r, unnest(%(fields)s::text[], %(values)s::text[]) AS k (field, value)
    WHERE r.id = %(run)s

-- name: deadline_passed
-- Whether a submission's deadline is already past on the database's clock, the clock
-- the start statement and the sweep compare Run.deadline_at with.
    SELECT %(deadline)s::timestamptz <= statement_timestamp()
