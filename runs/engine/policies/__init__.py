"""What the engine decides around attempts: recovery, probes, resolutions, waits and
signals, operators' actions, submissions, schedules, retention. Imports attempts/,
state/ and core/ (and one another, never in a loop)."""
