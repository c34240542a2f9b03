"""The DATABASE_URL that names a Django connection's database, for child processes
(test workers, `manage.py crashcheck`) that must use exactly the database this
process is connected to: pytest-django's test database, or whatever DATABASE_URL
pointed at."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode


def database_url(settings_dict: Mapping[str, Any]) -> str:
    """`postgres://user:password@host:port/name?options` for a connection's
    settings_dict (`connection.settings_dict`). A Unix-socket host (a path) is
    percent-encoded, as dj-database-url expects; scalar OPTIONS (sslmode, …) become
    query parameters, and so does the pooler (config/database.py), which a child must
    know of as well."""
    host = settings_dict.get("HOST") or ""
    host = quote(host, safe="") if host.startswith("/") else host
    auth = quote(settings_dict.get("USER") or "", safe="")
    if settings_dict.get("PASSWORD"):
        auth += ":" + quote(settings_dict["PASSWORD"], safe="")
    port = f":{settings_dict['PORT']}" if settings_dict.get("PORT") else ""
    name = quote(settings_dict.get("NAME") or "", safe="")
    options = {
        key: value
        for key, value in (settings_dict.get("OPTIONS") or {}).items()
        if isinstance(value, (str, int, float)) and not isinstance(value, bool)
    }
    if settings_dict.get("POOLER"):
        options["pooler"] = settings_dict["POOLER"]
    query = f"?{urlencode(options)}" if options else ""
    return f"postgres://{auth}@{host}{port}/{name}{query}"
