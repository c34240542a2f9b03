"""The retention policy's workflow in the admin: a name no registered workflow has is
refused beside the field, with the close known names (a misspelt policy would govern
no run, silently); blank stays the default policy; a policy kept for a workflow no
longer registered stays editable, since only a new or changed name is checked."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from runs.models import RetentionPolicy, RetentionPolicyChange
from tests.conftest import make_user
from tests.support.markup import folded

pytestmark = pytest.mark.django_db

ADD = "/admin/runs/retentionpolicy/add/"


def form(**fields: str) -> dict[str, str]:
    return {
        "name": "merges",
        "workflow": "merge-change",
        "enabled": "on",
        "payload_days": "10",
        "event_days": "20",
        "dedup_days": "400",
        "changes-TOTAL_FORMS": "0",
        "changes-INITIAL_FORMS": "0",
        **fields,
    }


@pytest.fixture
def admin_client(client: Client) -> Client:
    client.force_login(make_user("olivia", "operators"))
    return client


def workflow_error(answer: Any) -> str:
    """The text of the workflow field's row (the admin puts its errors there)."""
    page = folded(answer.content.decode())
    row = re.search(r'class="form-row[^"]*field-workflow.*?class="form-row[^"]*field-enabled', page)
    assert row, "no workflow row"
    return row.group(0)


def test_a_misspelt_workflow_is_refused_beside_the_field_with_the_close_names(admin_client):
    answer = admin_client.post(ADD, form(workflow="merge-chnage"))
    assert answer.status_code == 200
    said = workflow_error(answer)
    assert "errorlist" in said
    assert (
        "no workflow named &#x27;merge-chnage&#x27; is registered (did you mean merge-change"
    ) in said
    assert "Leave it empty for the default policy" in said
    assert not RetentionPolicy.objects.filter(name="merges").exists()
    assert not RetentionPolicyChange.objects.exists()

    assert admin_client.post(ADD, form()).status_code == 302  # the right name is saved
    assert RetentionPolicy.objects.get(name="merges").workflow == "merge-change"


def test_a_star_is_no_workflow_and_blank_is_the_default_policy(admin_client):
    answer = admin_client.post(ADD, form(workflow="*"))
    assert answer.status_code == 200
    said = workflow_error(answer)
    assert "no workflow named &#x27;*&#x27; is registered (the workflows: " in said
    assert "merge-change" in said
    assert "which governs every workflow without a policy of its own" in said

    default = RetentionPolicy.objects.get(workflow="")
    answer = admin_client.post(
        f"/admin/runs/retentionpolicy/{default.pk}/change/",
        form(name=default.name, workflow="", payload_days="7"),
    )
    assert answer.status_code == 302, answer.content.decode()[:2000]
    default.refresh_from_db()
    assert (default.workflow, default.payload_days) == ("", 7)


def test_a_policy_for_a_workflow_no_longer_registered_stays_editable(admin_client):
    kept = RetentionPolicy.objects.create(name="retired", workflow="retired-flow")
    change = f"/admin/runs/retentionpolicy/{kept.pk}/change/"
    answer = admin_client.post(change, form(name="retired", workflow="retired-flow"))
    assert answer.status_code == 302, answer.content.decode()[:2000]
    kept.refresh_from_db()
    assert (kept.workflow, kept.payload_days) == ("retired-flow", 10)

    # Changed to another unknown name: checked, refused, nothing changed.
    answer = admin_client.post(change, form(name="retired", workflow="retired-flow-2"))
    assert answer.status_code == 200
    assert "no workflow named &#x27;retired-flow-2&#x27; is registered" in workflow_error(answer)
    kept.refresh_from_db()
    assert kept.workflow == "retired-flow"
