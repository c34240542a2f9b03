"""Running the service: what every process reports about itself.

metrics (Prometheus), logcontext (the fields every log line carries) and heartbeat (a
worker's row for the workers page). Written from every layer, so they import no layer
(docs/operating.md).
"""
