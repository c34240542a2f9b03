"""A run exported as one versioned JSON document (runs/record/export.py), and read back by
`verify_export` (runs/record/export_check.py): a finished map run, a merge whose claim was
unresolved and then resolved, a run whose events retention compacted, and the
commands' refusals, each one line."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db.models import F
from django.utils import timezone
from pydantic import ValidationError

from runs import engine
from runs.errors import RunNotFound
from runs.models import Attempt, Claim, Event, MapRegistry, Run
from runs.record import export
from runs.record.export_check import problems_of
from runs.testing import run_inline
from tests.support.factories import crashed_merge

pytestmark = pytest.mark.django_db

TOP_LEVEL = [
    "format",
    "version",
    "exported_at",
    "exported_by",
    "run",
    "steps",
    "attempts",
    "claims",
    "registries",
    "signals",
    "history",
    "counts",
]


def migrated(count: int = 5, batch_size: int = 2) -> Run:
    run = run_inline("migrate-records", input={"count": count, "batch_size": batch_size})
    assert run.status == "succeeded"
    return run


def compacted(run: Run) -> None:
    """Retention's default policy applied to the run as if it finished 100 days ago:
    payloads, registry and events compacted, claims kept (dedup window)."""
    Run.objects.filter(pk=run.pk).update(finished_at=F("finished_at") - timedelta(days=100))
    engine.retention.apply()
    run.refresh_from_db()
    assert run.compacted_at is not None and run.claims_purged_at is None


def write(tmp_path: Path, doc: dict[str, Any], name: str = "run.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def verify(path: Path, capsys: Any) -> tuple[int, str, str]:
    """verify_export's exit status, stdout and stderr."""
    try:
        call_command("verify_export", str(path))
        code = 0
    except SystemExit as exit_info:
        code = int(exit_info.code or 0)
    out = capsys.readouterr()
    return code, out.out, out.err


# --- the document ------------------------------------------------------------------------
def test_a_finished_map_run_exports_its_steps_attempts_item_claims_and_every_event():
    run = migrated()
    doc = export.build(run.id, exported_by="cli")

    assert list(doc) == TOP_LEVEL
    assert (doc["format"], doc["version"], doc["exported_by"]) == (
        "durable-runs.run-export",
        1,
        "cli",
    )
    assert doc["run"]["id"] == str(run.id)
    assert (doc["run"]["status"], doc["run"]["input"]) == (
        "succeeded",
        {"count": 5, "batch_size": 2},
    )
    assert [(s["key"], s["status"], s["parent"], s["item_count"]) for s in doc["steps"]] == [
        ("list_records", "succeeded", None, None),
        ("migrate", "succeeded", None, None),
        ("migrate[0]", "succeeded", "migrate", 2),
        ("migrate[1]", "succeeded", "migrate", 2),
        ("migrate[2]", "succeeded", "migrate", 1),
    ]
    assert [(a["step"], a["number"], a["status"]) for a in doc["attempts"]] == [
        ("list_records", 1, "succeeded"),
        ("migrate[0]", 1, "succeeded"),
        ("migrate[1]", 1, "succeeded"),
        ("migrate[2]", 1, "succeeded"),
    ]
    # The five item claims are the completed-item registry: all of them, each resolved
    # by nobody (the engine completed it).
    assert len(doc["claims"]) == 5 == Claim.objects.filter(run=run).count()
    assert {(c["step"], c["status"], c["resolution"]) for c in doc["claims"]} <= {
        (f"migrate[{i}]", "succeeded", None) for i in range(3)
    }
    assert sorted(c["item_key"] for c in doc["claims"]) == sorted(
        Claim.objects.filter(run=run).values_list("item_key", flat=True)
    )
    events = list(Event.objects.filter(run=run).order_by("seq").values_list("seq", "type"))
    assert [(e["seq"], e["type"]) for e in doc["history"]["events"]] == events
    assert [e["seq"] for e in doc["history"]["events"]] == list(range(1, run.last_seq + 1))
    assert doc["history"]["summary"] is None
    assert doc["counts"] == {
        "steps": 5,
        "attempts": 4,
        "claims": 5,
        "item_claims": 5,
        "signals": 0,
        "events": run.last_seq,
        "events_removed": 0,
    }
    assert problems_of(doc) == []
    # Plain JSON all through (datetimes as ISO 8601 text).
    assert json.loads(json.dumps(doc)) == doc


def test_a_claim_unresolved_then_resolved_carries_who_when_why_and_evidence():
    claim = crashed_merge(change_id=7)
    before = export.build(claim.run_id, exported_by="user:olivia")
    (unresolved,) = before["claims"]
    assert (unresolved["key"], unresolved["status"], unresolved["resolution"]) == (
        claim.key,
        "unresolved",
        None,
    )
    assert unresolved["error"] == "worker worker-0 died (lease expired)"
    assert unresolved["evidence"] is None
    assert unresolved["unresolved_at"] is not None
    assert before["run"]["status"] == "needs_reconciliation"

    evidence = {"reference": "https://codehost.example/merges/7"}
    engine.resolve_claim(
        claim, "succeeded", actor="ann", note="merge 7 is on the host", evidence=evidence
    )
    claim.refresh_from_db()
    after = export.build(claim.run_id, exported_by="user:olivia")

    (resolved,) = after["claims"]
    assert resolved["status"] == "succeeded"
    assert resolved["resolution"] == {
        "outcome": "succeeded",
        "by": "ann",
        "at": claim.resolved_at.isoformat(),
        "note": "merge 7 is on the host",
        "evidence": evidence,
    }
    assert resolved["evidence"] == {"resolution": evidence}
    assert resolved["error"] == unresolved["error"]  # why it was unknown, kept
    assert (resolved["attempt"], resolved["step"]) == (1, "merge")
    assert [(a["step"], a["number"], a["status"]) for a in after["attempts"]] == [
        ("merge", 1, "crashed")
    ]
    types = [e["type"] for e in after["history"]["events"]]
    assert types.index("claim_unresolved") < types.index("claim_resolved")
    (decision,) = [e for e in after["history"]["events"] if e["type"] == "claim_resolved"]
    assert (decision["payload"]["actor"], decision["payload"]["note"]) == (
        "ann",
        "merge 7 is on the host",
    )
    assert after["run"]["status"] == "succeeded"
    assert problems_of(after) == []


def test_a_compacted_run_exports_its_summary_and_loses_no_event_from_its_account():
    run = migrated()
    before = export.build(run.id, exported_by="cli")
    compacted(run)
    doc = export.build(run.id, exported_by="cli")

    summary = doc["history"]["summary"]
    assert doc["history"]["events"] == []
    assert (summary["first_seq"], summary["last_seq"], summary["events_removed"]) == (
        1,
        run.last_seq,
        run.last_seq,
    )
    # What the summary counts is exactly the events the export had before compaction.
    assert summary["counts"] == dict(Counter(e["type"] for e in before["history"]["events"]))
    assert summary["projection"]["run_status"] == "succeeded"
    assert doc["counts"]["events"] == 0 and doc["counts"]["events_removed"] == run.last_seq
    assert doc["run"]["compacted_at"] is not None
    assert doc["run"]["input"]["compacted"] is True
    # The registry stage folded the item claims into a watermark.
    (registry,) = doc["registries"]
    assert (registry["step"], registry["items"], registry["watermark"]) == ("migrate", 5, 5)
    assert MapRegistry.objects.filter(run=run).count() == 1
    assert doc["claims"] == []
    assert problems_of(doc) == []


def test_an_unknown_run_is_not_found():
    with pytest.raises(RunNotFound):
        export.build(uuid.uuid4(), exported_by="cli")


# --- export_run and verify_export ----------------------------------------------------------
def test_export_run_to_a_file_then_verify_export_says_it_matches(tmp_path, capsys):
    run = migrated()
    path = tmp_path / f"run-{run.id}.json"

    call_command("export_run", str(run.id), output=str(path))

    assert capsys.readouterr().err.startswith(f"wrote {path}: run {run.id} (succeeded)")
    doc = json.loads(path.read_text())
    assert doc["exported_by"] == "cli" and doc["counts"]["claims"] == 5
    assert verify(path, capsys) == (
        0,
        f"{path}: OK, run {run.id} (migrate-records v1, succeeded): 5 steps, 4 attempts, "
        f"5 claims, {run.last_seq} events; matches the database\n",
        "",
    )


def test_export_run_prints_to_stdout_by_default(capsys):
    claim = crashed_merge()
    call_command("export_run", str(claim.run_id))
    doc = json.loads(capsys.readouterr().out)
    assert doc["run"]["id"] == str(claim.run_id) and doc["claims"][0]["status"] == "unresolved"


def test_export_run_refuses_an_unknown_run_and_a_bad_id(tmp_path):
    missing = uuid.uuid4()
    with pytest.raises(CommandError, match=f"^no run with id {missing}$"):
        call_command("export_run", str(missing), output=str(tmp_path / "x.json"))
    with pytest.raises(CommandError, match=r"^'nope' is not a run id"):
        call_command("export_run", "nope")
    assert not list(tmp_path.iterdir())


def test_verify_export_of_a_compacted_run(tmp_path, capsys):
    run = migrated()
    compacted(run)
    path = write(tmp_path, export.build(run.id, exported_by="cli"))
    code, out, err = verify(path, capsys)
    assert (code, err) == (0, "")
    assert out.endswith(f"0 events (+{run.last_seq} summarized); matches the database\n")


def test_verify_export_of_a_run_not_in_this_database_checks_the_document_alone(tmp_path, capsys):
    doc = export.build(migrated().id, exported_by="cli")
    doc["run"]["id"] = str(uuid.uuid4())
    code, out, err = verify(write(tmp_path, doc), capsys)
    assert (code, err) == (0, "")
    assert out.endswith("; run not in this database; checked the document alone\n")


def test_verify_export_refuses_another_version_in_one_line(tmp_path, capsys):
    doc = export.build(migrated().id, exported_by="cli")
    doc["version"] = 2
    path = write(tmp_path, doc, "run-2.json")
    assert verify(path, capsys) == (
        1,
        "",
        f"verify_export: {path} is version 2; this durable-runs reads version 1\n",
    )


@pytest.mark.parametrize(
    ("corrupt", "problem"),
    [
        (
            lambda doc: doc["history"]["events"][1].update(seq=1),
            "event seq 1 appears twice",
        ),
        (
            lambda doc: doc["attempts"][0].update(step="ghost"),
            'attempt 1 of step "ghost": no such step in the document',
        ),
        (
            lambda doc: doc["claims"][0].update(step="ghost"),
            "no such step in the document",
        ),
        (
            lambda doc: doc["counts"].update(claims=6),
            "counts.claims says 6, the document has 5",
        ),
        (
            lambda doc: doc.pop("claims"),
            "missing section: claims",
        ),
    ],
    ids=[
        "duplicate-seq",
        "attempt-of-missing-step",
        "claim-of-missing-step",
        "edited-count",
        "missing-section",
    ],
)
def test_verify_export_refuses_a_corrupted_document_naming_the_problem(
    tmp_path, capsys, corrupt, problem
):
    doc = export.build(migrated().id, exported_by="cli")
    corrupt(doc)
    path = write(tmp_path, doc)
    code, out, err = verify(path, capsys)
    assert (code, out) == (1, "")
    (line,) = err.splitlines()
    assert line.startswith(f"verify_export: {path}: ") and problem in line, line


def test_verify_export_names_a_lost_event_when_the_counts_were_edited_to_hide_it(tmp_path, capsys):
    run = migrated()
    doc = export.build(run.id, exported_by="cli")
    del doc["history"]["events"][3]
    doc["counts"]["events"] -= 1
    code, _, err = verify(write(tmp_path, doc), capsys)
    assert code == 1
    assert err.splitlines() == [
        f"verify_export: {tmp_path / 'run.json'}: history: the events should be seq "
        f"1..{run.last_seq} (the run's last_seq is {run.last_seq}), found {run.last_seq - 1}: "
        "seq 4 missing"
    ]


def test_verify_export_says_where_a_consistent_document_differs_from_the_database(tmp_path, capsys):
    run = migrated()
    doc = export.build(run.id, exported_by="cli")
    doc["steps"][1]["status"] = "failed"
    code, _, err = verify(write(tmp_path, doc), capsys)
    assert code == 1
    assert err.splitlines() == [
        f"verify_export: {tmp_path / 'run.json'}: differs from the database: "
        'step "migrate".status: the document says "failed", the database "succeeded"'
    ]


def test_verify_export_bad_input_is_one_line(tmp_path, capsys):
    missing = tmp_path / "nope.json"
    assert verify(missing, capsys) == (1, "", f"verify_export: {missing}: no such file\n")
    garbage = tmp_path / "garbage.json"
    garbage.write_text("run export, honest")
    assert verify(garbage, capsys) == (
        1,
        "",
        f"verify_export: {garbage}: not JSON (Expecting value at line 1 column 1)\n",
    )
    other = write(tmp_path, {"hello": "world"}, "other.json")
    assert verify(other, capsys) == (
        1,
        "",
        f"verify_export: {other}: not a run export (it has no format; "
        "expected 'durable-runs.run-export')\n",
    )


def test_export_reads_attempts_in_the_order_of_their_steps():
    """Attempts of a step retried are listed in number order, under their step."""
    run = run_inline(
        "migrate-records", input={"count": 3, "batch_size": 2}, faults=["after_effect:migrate"]
    )
    doc = export.build(run.id, exported_by="cli")
    by_step = [(a["step"], a["number"]) for a in doc["attempts"]]
    assert by_step == sorted(
        by_step, key=lambda sn: ([s["key"] for s in doc["steps"]].index(sn[0]), sn[1])
    )
    assert len(doc["attempts"]) == Attempt.objects.filter(run=run).count()
    assert problems_of(doc) == []


# --- the document's one description (runs/record/export_shape.py) ------------------------------
def test_a_section_of_the_wrong_shape_is_named_as_the_description_has_it():
    doc = export.build(migrated().id, exported_by="cli")
    doc["steps"], doc["run"] = {}, []
    assert problems_of(doc) == ["section run is not an object", "section steps is not a list"]


def test_the_builder_writes_nothing_its_description_lacks(monkeypatch):
    run = migrated()
    steps = export._steps
    monkeypatch.setattr(export, "_steps", lambda run_id: ({**s, "x": 1} for s in steps(run_id)))
    with pytest.raises(ValidationError, match=r"steps\.0\.x"):
        export.build(run.id, exported_by="cli")


def test_the_run_section_has_every_column_of_the_run_but_its_step_counter():
    """A column added to runs_run is exported, or named here with why it is not."""
    left_out = {"steps_remaining"}  # the engine's counter; the steps section says it
    columns = {f.attname for f in Run._meta.concrete_fields}
    assert set(export.RUN_FIELDS) == columns - left_out
    run = engine.submit_run(
        workflow="migrate-records",
        input={"count": 1},
        deadline=timezone.now() + timedelta(hours=1),
    )
    Run.objects.filter(pk=run.pk).update(on_behalf_of=["ann", "bob"])
    doc = export.build(run.id, exported_by="cli")
    assert doc["run"]["on_behalf_of"] == ["ann", "bob"]
    assert doc["run"]["deadline_at"] == Run.objects.get(pk=run.pk).deadline_at.isoformat()
    assert problems_of(doc) == []
    # A version 1 document written before the two were added still reads.
    del doc["run"]["deadline_at"], doc["run"]["on_behalf_of"]
    assert problems_of(doc) == []
