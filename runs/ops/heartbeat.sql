-- A worker's row of itself (runs/ops/heartbeat.py): written at start, refreshed by its
-- heartbeat thread, deleted at a clean stop. Every write is an upsert keyed on the node
-- name, so nothing is checked in Python first.

-- name: register
-- At start: this process is the worker of that name now, whatever was there before.
INSERT INTO runs_workerprocess
    (name, host, pid, pool_pids, concurrency, started_at, heartbeat_at)
VALUES (%(name)s, %(host)s, %(pid)s, %(pids)s::integer[], %(concurrency)s,
        coalesce(%(started)s, statement_timestamp()), statement_timestamp())
ON CONFLICT (name) DO UPDATE SET
    host = EXCLUDED.host, pid = EXCLUDED.pid, pool_pids = EXCLUDED.pool_pids,
    concurrency = EXCLUDED.concurrency, started_at = EXCLUDED.started_at,
    heartbeat_at = EXCLUDED.heartbeat_at
RETURNING started_at

-- name: beat
-- A heartbeat refreshes only its own process's row: an older process of the same name
-- (frozen, then continued after its successor started) does not take the row back.
INSERT INTO runs_workerprocess
    (name, host, pid, pool_pids, concurrency, started_at, heartbeat_at)
VALUES (%(name)s, %(host)s, %(pid)s, %(pids)s::integer[], %(concurrency)s,
        coalesce(%(started)s, statement_timestamp()), statement_timestamp())
ON CONFLICT (name) DO UPDATE SET
    pool_pids = EXCLUDED.pool_pids, heartbeat_at = EXCLUDED.heartbeat_at
WHERE runs_workerprocess.host = EXCLUDED.host AND runs_workerprocess.pid = EXCLUDED.pid
RETURNING started_at

-- name: forget
-- Rows of workers silent for RUNS_WORKER_FORGET_SECONDS (killed outright, never back).
DELETE FROM runs_workerprocess
WHERE heartbeat_at < statement_timestamp() - make_interval(secs => %(forget)s)

-- name: unregister
DELETE FROM runs_workerprocess WHERE name = %(name)s AND host = %(host)s AND pid = %(pid)s
