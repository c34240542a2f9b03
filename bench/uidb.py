"""The database of the UI benchmark (bench/seed_ui.py, bench/ui.py).

It is never the configured database itself: on the server DATABASE_URL names, the
benchmark uses a database of its own, `<name>_ui_bench` (or `--database NAME`),
created and migrated when missing, so 100,000 made-up runs never land next to a
developer's. Both scripts call `use_bench_database()` before Django is set up, then
`setup_django()`.
"""

from __future__ import annotations

import os
import sys
import uuid
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_URL = "postgres://postgres@127.0.0.1:5432/durable_runs"  # config/settings.py's
SUFFIX = "_ui_bench"

# What the seed records about itself in the bench database (the marker `--if-needed`
# and bench/ui.py look for).
SEED_TABLE = "bench_ui_seed"


def _with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path="/" + quote(name, safe="")))


def use_bench_database(name: str | None = None, *, suffix: str = SUFFIX) -> str:
    """Point DATABASE_URL at the benchmark's database (created if missing) and return
    its name: `name`, else the configured database's name and `suffix` (the name only:
    a URL's query, ?sslmode=…, is not part of it)."""
    import psycopg
    from psycopg import sql

    url = os.environ.get("DATABASE_URL") or DEFAULT_URL
    configured = unquote(urlsplit(url).path.lstrip("/")) or "durable_runs"
    name = name or f"{configured}{suffix}"
    # CREATE DATABASE from the maintenance database, as Django's test runner does.
    for maintenance in ("postgres", configured):
        try:
            conn = psycopg.connect(_with_database(url, maintenance), autocommit=True)
        except psycopg.OperationalError:
            continue
        with conn:
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
            if found.fetchone() is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
                print(f"created database {name}", flush=True)
        break
    else:
        raise SystemExit(f"cannot connect to the server of {url} to create database {name}")
    os.environ["DATABASE_URL"] = _with_database(url, name)
    return name


def setup_django() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    # Nothing here publishes to a queue a worker reads (bench/seed_ui.py switches
    # publishing off); a queue of its own all the same.
    os.environ.setdefault("RUNS_QUEUE", f"durable-runs-bench-ui-{uuid.uuid4().hex[:6]}")
    # The runs it seeds and reads are the examples' (a deployment registers none).
    os.environ.setdefault("RUNS_WORKFLOW_MODULES", "examples.workflows")
    import django

    django.setup()
