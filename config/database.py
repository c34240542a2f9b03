"""DATABASES["default"] from DATABASE_URL, directly to PostgreSQL or through a pooler in
transaction mode (docs/operating.md, "PgBouncer")."""

from __future__ import annotations

from typing import Any

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

# Poolers that hand each transaction to whichever server connection is free: nothing
# may outlive a transaction on the session (prepared statements, WITH HOLD cursors,
# session-level SET).
TRANSACTION_POOLERS = ("pgbouncer",)


def pooler_named(value: object) -> str:
    """One of TRANSACTION_POOLERS, or "" for none (unset, empty or "none")."""
    name = str(value or "").strip().lower()
    if name in ("", "none"):
        return ""
    if name not in TRANSACTION_POOLERS:
        raise ImproperlyConfigured(
            f"DATABASE_POOLER (or ?pooler= in DATABASE_URL) must be pgbouncer or none, "
            f"not {value!r}"
        )
    return name


def default_database(
    url: str,
    *,
    pooler: str | None,
    server_options: list[str],
    connect_timeout: int,
) -> dict[str, Any]:
    """The settings dict of `url`. `pooler` (DATABASE_POOLER) wins over the URL's
    `?pooler=`; behind one, POOLER names it (runs/sql/prepared.py prepares nothing then),
    Django opens no server-side cursors, and `server_options` are not sent."""
    database: dict[str, Any] = dict(
        dj_database_url.parse(
            url,
            # Workers keep their connections; health checks make them reconnect on their
            # own after a PostgreSQL restart.
            conn_max_age=600,
            conn_health_checks=True,
        )
    )
    options: dict[str, Any] = database.setdefault("OPTIONS", {})
    # Never handed to libpq, which knows no such parameter.
    from_url = options.pop("pooler", None)
    database["POOLER"] = pooler_named(pooler if pooler else from_url)
    if database["POOLER"]:
        # Django's iterator() in autocommit declares a WITH HOLD cursor: it lives on the
        # session, and the next fetch may reach another one.
        database["DISABLE_SERVER_SIDE_CURSORS"] = True
        # PgBouncer refuses a client that sends `options` ("unsupported startup
        # parameter"), or drops them with ignore_startup_parameters; either way they
        # would not reach the server connections it opens. docs/operating.md says where
        # they go instead.
        server_options = []
    given = options.get("options", "")
    database["OPTIONS"] = {
        "connect_timeout": connect_timeout,
        "keepalives": 1,
        "keepalives_idle": 30,
        "keepalives_interval": 10,
        "keepalives_count": 3,
        **options,
    }
    joined = " ".join([given, *server_options]).strip()
    if joined:
        database["OPTIONS"]["options"] = joined
    else:
        database["OPTIONS"].pop("options", None)
    return database
