"""Where work comes in: a step's message becomes an attempt (execute.py)."""
