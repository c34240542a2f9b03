"""The run page shows a run's deadline, and says when the run was ended at it
(docs/operating.md#deadlines)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db.models.functions import Now
from django.utils import timezone

from runs import engine
from runs.models import Run, Step
from runs.pages.timefmt import to_the_second
from tests.support.waiting import wait_for

pytestmark = pytest.mark.django_db


def test_the_run_page_shows_the_deadline_ahead_and_then_that_the_run_was_ended_at_it(
    operator_client,
):
    deadline = timezone.now() + timedelta(seconds=1.5)
    run = engine.submit_run(workflow="deadline-order", input={}, deadline=deadline)

    page = operator_client.get(f"/runs/{run.id}/").content.decode()
    assert f'<dd class="deadline">{to_the_second(run.deadline_at)}</dd>' in page

    wait_for(lambda: Run.objects.filter(pk=run.id, deadline_at__lte=Now()).exists())
    engine.sweep()
    page = operator_client.get(f"/runs/{run.id}/").content.decode()
    assert (
        f'<dd class="deadline">{to_the_second(run.deadline_at)}: deadline passed, '
        "the run was ended at it</dd>"
    ) in page
    assert Step.objects.filter(run=run, status="pending").count() == 3


def test_a_run_without_a_deadline_shows_no_deadline_row(operator_client):
    run = engine.submit_run(workflow="quick-one", input={})

    assert "<dt>deadline</dt>" not in operator_client.get(f"/runs/{run.id}/").content.decode()
