"""Reads that the command line, the pages and the API share: a run's summary and
detail (summaries), and the runs list's filter (filters). Pages' own reads live beside
them (runs/web/queries.py, reconciliation/queries.py).
"""
