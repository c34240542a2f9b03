"""Two real beats, one of them killed and restarted across ticks: every tick of a
per-second schedule yields exactly one run."""

from __future__ import annotations

import signal
from datetime import timedelta

from runs.engine.tools import db_now, next_tick_after, tick_key
from runs.models import Run, Schedule, SubmissionKey
from tests.support.waiting import wait_for

EVERY_SECOND = "* * * * * *"  # croniter: six fields, seconds last


def keys_of(name: str) -> list[str]:
    return sorted(
        SubmissionKey.objects.filter(key__startswith=f"schedule:{name}:").values_list(
            "key", flat=True
        )
    )


def test_two_beats_and_a_restart_submit_each_tick_once(cluster):
    schedule = Schedule.objects.create(
        name="every-second",
        workflow="charge-payment",
        cron=EVERY_SECOND,
        input={"amount": 1},
        missed=Schedule.Missed.CATCH_UP,
        next_tick_at=next_tick_after(EVERY_SECOND, "UTC", db_now()),
    )
    first_tick = schedule.next_tick_at
    fast = {"RUNS_SCHEDULE_INTERVAL": "0.3"}
    cluster.worker(**fast)
    cluster.worker(**fast)
    beat_a = cluster.beat(**fast)
    cluster.beat(**fast)
    wait_for(lambda: len(keys_of("every-second")) >= 3, timeout=30, what="three ticks")

    # One beat dies mid-stream (a deploy, an OOM kill) and comes back.
    beat_a.signal(signal.SIGKILL)
    beat_a.wait_exit()
    cluster.beat(**fast)
    wait_for(lambda: len(keys_of("every-second")) >= 8, timeout=30, what="eight ticks")
    Schedule.objects.filter(pk=schedule.pk).update(enabled=False)
    cluster.stop_all()

    keys = keys_of("every-second")
    runs = Run.objects.filter(workflow="charge-payment")
    assert runs.count() == len(keys)  # one run per key, no run without its tick
    # The ticks are consecutive seconds from the first: none skipped, none twice.
    schedule.refresh_from_db()
    last = schedule.last_tick_at
    expected = [
        tick_key("every-second", first_tick + timedelta(seconds=i))
        for i in range(int((last - first_tick).total_seconds()) + 1)
    ]
    assert keys == expected, cluster.logs()
