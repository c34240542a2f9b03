-- What a run that stopped for good leaves open (stopped.py).

-- name: withdraw_unstarted
-- The plan's steps still queued for a first or next attempt go back to pending, in the
-- transaction that stopped the run: no worker may start them (a start needs an active
-- run), so they wait for nothing and are not "queued". Conditional on the status, so a
-- start that committed first keeps its step (it runs to the end and is recorded). A
-- message of theirs still in the broker finds them pending and does nothing.
    UPDATE runs_step SET status = %(pending)s, queued_at = NULL, message_due_at = NULL
    WHERE run_id = %(run)s AND status = %(queued)s AND compensates = ''
    RETURNING key
