#!/usr/bin/env python
"""Django's command-line utility for durable-runs."""

import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.conf import settings
    from django.core.exceptions import ImproperlyConfigured
    from django.core.management import execute_from_command_line

    try:
        settings.INSTALLED_APPS  # noqa: B018 (loads config/settings.py)
    except ImproperlyConfigured as exc:
        # The settings refuse bad configuration with a message that says what to set;
        # a traceback would only bury it.
        sys.exit(str(exc))
    execute_from_command_line(sys.argv)


if __name__ == "__main__":
    main()
