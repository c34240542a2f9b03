"""Where work comes in: a step's message becomes an attempt (entry/execute.py)."""
