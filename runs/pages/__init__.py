"""The page shell every app's pages stand on: who may see a page (access.py), the request a
view is given (http.py), which reading pages read the replica (replica.py), what the
layout needs (layout.py), and what an app adds to the navigation and the overview
(contributions.py); how long a login lasts (sessions.py); and how times and values are
said to a person, one way everywhere (timefmt.py, words.py). The run pages (runs.web)
and the reconciliation queue import it; it imports neither (docs/architecture.md#where-
the-web-code-lives)."""
