"""/runs/<id>/export.json, behind the run page's Export (JSON): the export document for
viewers and operators, 404 for a run that does not exist, nothing for other roles."""

from __future__ import annotations

import uuid

import pytest

from runs.record import export
from runs.testing import run_inline
from tests.conftest import make_user

pytestmark = pytest.mark.django_db


def test_a_viewer_gets_the_document_as_a_download(viewer_client):
    run = run_inline("migrate-records", input={"count": 2, "batch_size": 2})
    response = viewer_client.get(f"/runs/{run.id}/export.json")
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.id}.json"'
    assert response.json() == export.build(run.id, exported_by="user:victor")


def test_an_unknown_or_malformed_run_is_404(operator_client):
    assert operator_client.get(f"/runs/{uuid.uuid4()}/export.json").status_code == 404
    assert operator_client.get("/runs/nope/export.json").status_code == 404


def test_a_submitter_or_no_role_gets_403_and_nobody_signed_in_goes_to_login(client):
    run = run_inline("migrate-records", input={"count": 1, "batch_size": 1})
    path = f"/runs/{run.id}/export.json"
    assert client.get(path)["Location"].startswith("/login/")
    for name, role in (("sam", "submitters"), ("nadia", None)):
        client.force_login(make_user(name, role))
        assert client.get(path).status_code == 403
