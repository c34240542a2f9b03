"""The plan's revision: it goes up whenever steps enter the plan (a map's batches,
compensations), and the steps that enter with it carry it in their claim keys."""

from __future__ import annotations

import logging
import uuid

from django.db import connection

log = logging.getLogger(__name__)


def bump_revision(run_id: uuid.UUID) -> int:
    """The run's plan changes (batches or compensations enter it): its next revision,
    part of the idempotency keys of the steps that enter the plan with it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE runs_run SET plan_revision = plan_revision + 1 WHERE id = %s "
            "RETURNING plan_revision",
            [run_id],
        )
        row = cursor.fetchone()
    assert row is not None
    return int(row[0])
