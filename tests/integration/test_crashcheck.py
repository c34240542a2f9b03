"""`manage.py crashcheck`: a real worker killed at every (step, fault point), recovery by
fresh worker and beat processes, effects counted. The command runs in this process
against pytest's test database; its subprocesses get that database's URL."""

from __future__ import annotations

import io

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Count

from examples.models import Merge, TargetRecord
from runs.engine import tools
from runs.models import Claim, Run
from runs.states import ClaimStatus, RunStatus
from runs.tools import crashcheck

pytestmark = [pytest.mark.workers, pytest.mark.broker]


def table_rows(output: str, steps: tuple[str, ...]) -> dict[tuple[str, str], list[str]]:
    """(step, point) -> the row's cells, split on whitespace ("not reached" is two)."""
    rows = {}
    for line in output.splitlines():
        cells = line.split()
        if len(cells) >= 2 and cells[0] in steps and cells[1] in tools.faults.POINTS:
            rows[(cells[0], cells[1])] = cells
    return rows


def test_crashcheck_migrate_records_recovers_every_crash_exactly_once(transactional_db):
    out, err = io.StringIO(), io.StringIO()

    call_command(
        "crashcheck",
        "migrate-records",
        "--input",
        '{"count": 60, "batch_size": 20}',
        stdout=out,
        stderr=err,
    )

    output = out.getvalue()
    rows = table_rows(output, ("list_records", "migrate"))
    assert len(rows) == 8, output
    assert list(rows) == [(s, p) for s in ("list_records", "migrate") for p in tools.faults.POINTS]
    for cells in rows.values():
        # step, point, outcome, effects, expected, run status, history, run
        assert cells[2:8] == ["recovered", "60", "60", "succeeded", "ok", cells[7]], output
    assert "DUPLICATE" not in output and "LOST" not in output
    assert output.splitlines()[-1].endswith("8 recovered: OK")
    assert err.getvalue().count("] ") == 8  # one progress line per check
    # Eight runs, each with exactly 60 target rows of 60 distinct records.
    run_ids = {cells[7] for cells in rows.values()}
    assert len(run_ids) == 8
    assert {str(i) for i in Run.objects.values_list("id", flat=True)} == run_ids
    per_run = {
        str(r["run_id"]): (r["n"], r["distinct"])
        for r in TargetRecord.objects.values("run_id").annotate(
            n=Count("id"), distinct=Count("record_id", distinct=True)
        )
    }
    assert per_run == {run_id: (60, 60) for run_id in run_ids}
    assert set(Run.objects.values_list("status", flat=True)) == {RunStatus.SUCCEEDED}


def test_crashcheck_merge_change_escalates_uncertain_merges(transactional_db):
    out = io.StringIO()

    call_command(
        "crashcheck",
        "merge-change",
        "--input",
        '{"change_id": 5}',
        stdout=out,
        stderr=io.StringIO(),
    )

    output = out.getvalue()
    rows = table_rows(output, ("merge",))
    outcomes = {point: cells[2] for (_, point), cells in rows.items()}
    assert outcomes == {
        "before_claim": "recovered",
        "after_claim": "escalated",
        "after_effect": "escalated",
        "after_commit": "recovered",
    }, output
    assert "DUPLICATE" not in output and "LOST" not in output
    assert {cells[-2] for cells in rows.values()} == {"ok"}
    # Killed with the claim taken but before the merge: nothing merged, a human decides.
    after_claim = Run.objects.get(pk=rows[("merge", "after_claim")][-1])
    assert after_claim.status == RunStatus.NEEDS_RECONCILIATION
    assert not Merge.objects.filter(run_id=after_claim.id).exists()
    # Killed after the merge: merged once, and the claim is left unresolved (not resolved).
    after_effect = Run.objects.get(pk=rows[("merge", "after_effect")][-1])
    assert Merge.objects.filter(run_id=after_effect.id).count() == 1
    assert Claim.objects.get(run=after_effect).status == ClaimStatus.UNRESOLVED
    assert Merge.objects.count() == 4 - 1  # one per run, except after_claim's
    assert output.splitlines()[-1].endswith("2 recovered, 2 escalated: OK")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["migrate-records", "--input", "{not json"], "--input is not valid JSON"),
        (["no-such-workflow", "--input", "{}"], "unknown workflow 'no-such-workflow'"),
        (["merge-change", "--version", "9", "--input", '{"change_id": 5}'], "no version 9"),
        (["merge-change", "--input", '{"change": 5}'], "unknown field 'change'"),
        (["merge-change", "--input", "[5]"], "input must be a JSON object"),
        (["merge-change", "--input", '{"change_id": 5}', "--nth", "0"], "--nth"),
    ],
)
def test_crashcheck_refuses_bad_arguments_before_starting_anything(db, monkeypatch, argv, message):
    def forbidden(*args, **kwargs):
        raise AssertionError("crashcheck started a process")

    monkeypatch.setattr(crashcheck.subprocess, "Popen", forbidden)
    monkeypatch.setattr(crashcheck.subprocess, "run", forbidden)

    with pytest.raises(CommandError, match=message):
        call_command("crashcheck", *argv, stdout=io.StringIO(), stderr=io.StringIO())
    assert not Run.objects.exists()


@pytest.mark.parametrize(
    ("status", "settled", "effects", "expected", "killed", "outcome"),
    [
        (RunStatus.SUCCEEDED, True, 60, 60, True, crashcheck.RECOVERED),
        (RunStatus.SUCCEEDED, True, 61, 60, True, crashcheck.DUPLICATE),
        (RunStatus.NEEDS_RECONCILIATION, True, 2, 1, True, crashcheck.DUPLICATE),
        (RunStatus.SUCCEEDED, True, 59, 60, True, crashcheck.LOST),
        (RunStatus.FAILED, True, 60, 60, True, crashcheck.LOST),
        (RunStatus.RUNNING, False, 10, 60, True, crashcheck.LOST),
        (RunStatus.NEEDS_RECONCILIATION, True, 0, 1, True, crashcheck.ESCALATED),
        (RunStatus.SUCCEEDED, True, 60, 60, False, crashcheck.NOT_REACHED),
        (RunStatus.SUCCEEDED, True, 61, 60, False, crashcheck.DUPLICATE),
    ],
)
def test_classify(status, settled, effects, expected, killed, outcome):
    assert (
        crashcheck.classify(
            status=status, settled=settled, effects=effects, expected=expected, killed=killed
        )
        == outcome
    )
