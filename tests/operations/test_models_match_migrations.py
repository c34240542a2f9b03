"""A model changed without its migration would deploy a database that is not what the
code expects: `makemigrations --check` finds nothing to write (CONTRIBUTING.md)."""

from __future__ import annotations

import io

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_every_model_change_has_its_migration():
    out = io.StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exit_:
        pytest.fail(f"makemigrations would write a migration ({exit_.code}):\n{out.getvalue()}")
