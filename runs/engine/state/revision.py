"""The plan's revision: it goes up whenever steps enter the plan (a map's batches,
compensations), and the steps that enter with it carry it in their claim keys."""

from __future__ import annotations

import uuid

from django.db import connection

from runs import sql

SQL = sql.load(__file__)


def bump_revision(run_id: uuid.UUID) -> int:
    """The run's plan changes (batches or compensations enter it): its next revision,
    part of the idempotency keys of the steps that enter the plan with it."""
    with connection.cursor() as cursor:
        cursor.execute(SQL["bump"], {"run": run_id})
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])
