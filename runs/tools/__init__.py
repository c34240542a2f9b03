"""Tools around the service, never inside a request or a step: crashcheck (does a
workflow survive its worker being killed?) and processes (real Celery worker and beat
child processes for crashcheck, the tests and bench/). Only these may use the engine's
tools door (runs.engine.tools) besides bench/ and the tests.
"""
