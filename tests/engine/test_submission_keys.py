"""Submission dedup belongs to the engine: one run per idempotency key, decided by the
database, whatever the way in."""

from __future__ import annotations

import io
import threading

import pytest
from django.core.management import CommandError, call_command

from runs import engine
from runs.errors import InvalidInput, InvalidSubmissionKey, SubmissionKeyConflict
from runs.models import Event, Run, SubmissionKey
from tests.support.races import Background

MERGE = {"workflow": "merge-change", "input": {"change_id": 5}}


def test_submit_same_key_same_request_returns_the_first_run(db):
    first = engine.submit(**MERGE, key="order-5")
    again = engine.submit(**MERGE, key="order-5")
    assert (first.created, again.created) == (True, False)
    assert again.run.id == first.run.id
    assert Run.objects.count() == 1
    assert SubmissionKey.objects.get().run_id == first.run.id


def test_submit_same_key_another_request_is_refused_naming_the_run(db):
    first = engine.submit(**MERGE, key="order-5")
    events_before = Event.objects.count()
    with pytest.raises(SubmissionKeyConflict) as refused:
        engine.submit(workflow="merge-change", input={"change_id": 6}, key="order-5")
    assert str(first.run.id) in str(refused.value)
    assert "already used for a different request" in str(refused.value)
    assert refused.value.run_id == first.run.id
    assert (Run.objects.count(), Event.objects.count()) == (1, events_before)


def test_submit_explicit_version_is_another_request_than_latest(db):
    engine.submit(**MERGE, key="k1")
    with pytest.raises(SubmissionKeyConflict):
        engine.submit(workflow="merge-change", version=1, input={"change_id": 5}, key="k1")


@pytest.mark.parametrize("key", ["", "has space", "x" * 201, "tab\t", "é"])
def test_submit_bad_key_is_refused_and_nothing_written(db, key):
    with pytest.raises(InvalidSubmissionKey, match="idempotency key"):
        engine.submit(**MERGE, key=key)
    assert (Run.objects.count(), SubmissionKey.objects.count()) == (0, 0)


def test_submit_without_key_creates_a_run_each_time(db):
    engine.submit(**MERGE)
    engine.submit(**MERGE)
    assert Run.objects.count() == 2


def test_submit_invalid_input_with_a_key_claims_nothing(db):
    with pytest.raises(InvalidInput):
        engine.submit(workflow="merge-change", input={"change_id": "x"}, key="k2")
    assert SubmissionKey.objects.count() == 0
    assert engine.submit(**MERGE, key="k2").created


@pytest.mark.django_db(transaction=True)
def test_submit_twenty_concurrent_identical_submissions_make_one_run():
    barrier = threading.Barrier(20)

    def submit():
        barrier.wait()
        sub = engine.submit(**MERGE, key="burst")
        return (sub.run.id, sub.created)

    results = [Background(submit) for _ in range(20)]
    outcomes = [r.join() for r in results]
    assert Run.objects.count() == 1
    assert {run_id for run_id, _ in outcomes} == {Run.objects.get().id}
    assert sorted(created for _, created in outcomes) == [False] * 19 + [True]


def test_submit_run_command_with_key(db):
    out, err = io.StringIO(), io.StringIO()
    args = ["submit_run", "merge-change", "--input", '{"change_id": 5}', "--key", "cli-1"]
    call_command(*args, stdout=out, stderr=err)
    first = out.getvalue().strip().splitlines()[-1]
    out2, err2 = io.StringIO(), io.StringIO()
    call_command(*args, stdout=out2, stderr=err2)
    assert out2.getvalue().strip().splitlines()[-1] == first
    assert "already submitted this request" in err2.getvalue()
    with pytest.raises(CommandError, match="already used for a different request"):
        call_command("submit_run", "merge-change", "--input", '{"change_id": 6}', "--key", "cli-1")
    assert Run.objects.count() == 1
