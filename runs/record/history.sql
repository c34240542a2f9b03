-- Reading a run's history against its rows (runs/record/history.py).

-- name: snapshot
-- Every query after this one in the transaction sees the database as of its first:
-- a run that moves on meanwhile is read whole, not half before and half after.
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY
