-- Schedules (schedules.py). Parameters only.

-- name: db_now
-- The database's clock: every worker and beat agrees on it.
    SELECT now()

-- name: sync_declared
-- Create or update the row of a schedule declared in code. The code owns cron, time
-- zone, policy and input; `enabled` stays as the admin left it. A row whose cron or
-- time zone changed restarts at its next tick; a row that already says what the code
-- declares is not written at all.
    INSERT INTO runs_schedule AS s (name, workflow, version, cron, timezone, missed,
        max_catch_up, input, next_tick_at, enabled, declared_in_code, skipped_ticks,
        last_error, created_at, updated_at)
    VALUES (%(name)s, %(workflow)s, %(version)s, %(cron)s, %(timezone)s, %(missed)s,
        %(max_catch_up)s, %(input)s::jsonb, %(next_tick_at)s, true, true, 0, '', now(), now())
    ON CONFLICT (name) DO UPDATE SET
        workflow = EXCLUDED.workflow, version = EXCLUDED.version,
        missed = EXCLUDED.missed, max_catch_up = EXCLUDED.max_catch_up,
        input = EXCLUDED.input, cron = EXCLUDED.cron, timezone = EXCLUDED.timezone,
        declared_in_code = true, updated_at = now(),
        next_tick_at = CASE
            WHEN s.cron IS DISTINCT FROM EXCLUDED.cron
              OR s.timezone IS DISTINCT FROM EXCLUDED.timezone
              OR s.next_tick_at IS NULL
            THEN EXCLUDED.next_tick_at ELSE s.next_tick_at END
    WHERE (s.workflow, s.version, s.cron, s.timezone, s.missed, s.max_catch_up, s.input,
           s.declared_in_code)
       IS DISTINCT FROM (EXCLUDED.workflow, EXCLUDED.version, EXCLUDED.cron,
           EXCLUDED.timezone, EXCLUDED.missed, EXCLUDED.max_catch_up, EXCLUDED.input,
           true)
