"""Where the tests find the project, and the test database as a URL for the processes
they start."""

from __future__ import annotations

from pathlib import Path

from django.db import connection

from runs.sql.dburl import database_url

ROOT = Path(__file__).resolve().parents[2]


def database_url_for_tests() -> str:
    """A DATABASE_URL naming the test database pytest-django created."""
    return database_url(connection.settings_dict)
