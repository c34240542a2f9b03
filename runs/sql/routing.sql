-- A streaming replica's state and its primary's position (replica.py).

-- name: replica_state
-- Lag: zero when everything received is replayed (an idle primary sends nothing, and
-- the last replayed commit may be hours old without any lag); otherwise the age of the
-- last commit replayed, the usual measure of how stale a read is.
    SELECT pg_is_in_recovery(),
           CASE WHEN pg_last_wal_receive_lsn() IS NOT DISTINCT FROM pg_last_wal_replay_lsn()
                THEN 0
                ELSE EXTRACT(EPOCH FROM clock_timestamp() - pg_last_xact_replay_timestamp())
           END::float,
           (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::bigint

-- name: primary_position
    SELECT (pg_current_wal_lsn() - '0/0'::pg_lsn)::bigint
