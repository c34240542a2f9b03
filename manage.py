#!/usr/bin/env python
"""Django's command-line utility for durable-runs."""

from __future__ import annotations

import os
import shlex
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line
    from django.db import OperationalError

    try:
        settings.INSTALLED_APPS  # noqa: B018 (loads config/settings.py)
    except ImproperlyConfigured as exc:
        # The settings refuse bad configuration with a message that says what to set;
        # a traceback would only bury it.
        sys.exit(str(exc))
    try:
        execute_from_command_line(sys.argv)
    except OperationalError as exc:
        message = connection_failure(exc)
        if message is None:  # a statement failed: a bug, whose traceback is worth reading
            raise
        sys.exit(message)


def connection_failure(exc: BaseException) -> str | None:
    """One line for an error raised while opening a database connection (None for any
    other error): where it tried, why it failed, how to start it. Read from the failing
    connection's settings, so the password never appears."""
    from django.db.backends.base.base import BaseDatabaseWrapper

    tb = exc.__traceback__
    while tb is not None:
        frame = tb.tb_frame
        wrapper = frame.f_locals.get("self")
        if frame.f_code.co_name == "get_new_connection" and isinstance(
            wrapper, BaseDatabaseWrapper
        ):
            break
        tb = tb.tb_next
    else:
        return None
    params = wrapper.settings_dict
    host = str(params.get("HOST") or "")
    where = f"socket {host}" if host.startswith("/") else host or "the default socket"
    # libpq: 'connection to server at "h", port p failed: Connection refused\n\tIs the …'
    first_line = (str(exc).splitlines() or [""])[0]
    reason = " ".join(first_line.rpartition(" failed: ")[2].removeprefix("FATAL:").split())
    port = params.get("PORT") or 5432
    name = params.get("NAME")
    said = f"cannot reach PostgreSQL at {where} port {port}, database {name} ({reason})"
    if reason.startswith("database ") and reason.endswith(" does not exist"):
        # The server answers; `make up` would fail the same way (it creates a database
        # only on its embedded server), so it is no advice here.
        createdb = f"createdb -h {shlex.quote(host)} -p {port}" if host else f"createdb -p {port}"
        return (
            f"{said}: create it ({createdb} {shlex.quote(str(name))}), or set "
            "DATABASE_URL to a database that exists; `make up` creates one only on its "
            "embedded server"
        )
    return f"{said}: start it with `make up`, or set DATABASE_URL to a server that is running"


if __name__ == "__main__":
    main()
