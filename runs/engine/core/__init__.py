"""The ground the engine stands on: claim keys, the clock, JSON checks, the SQL loader,
the run row's lock, fault points, principals, publishing messages by task name, what a
definition implies (kept once per process). Imports nothing else of the engine."""
