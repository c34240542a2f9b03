"""The run's state: its status and end, what a step's success makes ready, map
expansion, conditions, compensation, unresolved claims, results. Imports only core/."""
