-- The plan's revision (revision.py).

-- name: bump
    UPDATE runs_run SET plan_revision = plan_revision + 1 WHERE id = %(run)s
    RETURNING plan_revision
