"""Publishing messages, by task name.

A message is only a hint that a step may be ready (or a claim due for its probe), so it
goes out after commit and carries only an id; a lost one is repaired by the sweeper. The
engine names the task it sends (runs/tasks.py defines it) and never imports the tasks."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from celery import current_app
from django.conf import settings
from django.db import transaction
from kombu.connection import Connection
from kombu.entity import Queue

from . import faults

log = logging.getLogger(__name__)

# The names runs/tasks.py gives the tasks (a message names its task; the broker and the
# worker know nothing else of the engine).
EXECUTE_STEP = "runs.execute_step"
PROBE_CLAIM = "runs.probe_claim"


def send(task: str, arg: int, countdown: float | None = None) -> None:
    """One message for `task`, with one id; the settings' routes pick its queue. The one
    place a message leaves the engine (a test's transport replaces it)."""
    current_app.send_task(task, args=(arg,), countdown=countdown)


def bounded(countdown: float | None) -> float | None:
    """A countdown of at most RUNS_MAX_COUNTDOWN_SECONDS. The worker that receives a
    message with a countdown holds it unacknowledged until then, and a broker takes a
    message held too long for lost: Redis delivers it again after its visibility
    timeout, RabbitMQ closes the channel after its consumer_timeout. A longer wait is
    made of several messages: one that arrives before its time on the database's clock
    is sent again for what remains (republish_if_early, the probe's early arrival)."""
    if countdown is None:
        return None
    return min(countdown, float(settings.RUNS_MAX_COUNTDOWN_SECONDS))


def publish_now(step_ids: Iterable[int], countdown: float | None = None) -> None:
    countdown = bounded(countdown)
    for step_id in step_ids:
        for _ in range(faults.message_copies()):
            try:
                send(EXECUTE_STEP, step_id, countdown)
            except Exception:
                # The row says queued; the sweeper will republish it.
                log.exception("could not publish step %s; the sweeper will retry", step_id)


def publish_on_commit(
    step_ids: list[int],
    *,
    countdown: float | None = None,
    fault_step: str | None = None,
) -> None:
    """After the surrounding transaction commits, publish a message per step.

    `fault_step` marks the commit of that step's completion: the `after_commit` fault
    point fires between the commit and the publish."""

    def send() -> None:
        if fault_step is not None:
            faults.hit("after_commit", fault_step)
        publish_now(step_ids, countdown)

    transaction.on_commit(send)


def publish_probes(claim_ids: list[int], delays: dict[int, float] | None = None) -> None:
    """One probe message per claim, each after its delay if `delays` names one. Returns
    nothing and raises nothing: a message that cannot be sent is logged, and the
    sweeper publishes it again."""
    for claim_id in claim_ids:
        delay = bounded((delays or {}).get(claim_id) or None)
        try:
            send(PROBE_CLAIM, claim_id, delay)
        except Exception:
            log.exception("could not publish probe of claim %s; the sweeper will retry", claim_id)


def queue_depths(names: Iterable[str]) -> tuple[dict[str, int] | None, str]:
    """Messages waiting in each named queue as the broker counts them, from a passive
    declare over one fresh connection with the readiness check's timeout: LLEN of the
    list on Redis, message_count on RabbitMQ; a queue the broker does not know (Redis
    drops an empty list) holds 0. Messages a worker holds (prefetched, or with a
    countdown) are not counted. The one reader of depths: the sweeper's back-off, the
    workers page and the batch page.

    Returns (depths, "") or, when the broker cannot be read, (None, the error's text)."""
    timeout = settings.RUNS_HEALTH_TIMEOUT_SECONDS
    depths: dict[str, int] = {}
    try:
        with Connection(settings.CELERY_BROKER_URL, connect_timeout=timeout) as conn:
            conn.ensure_connection(max_retries=1, interval_start=0, timeout=timeout)
            for name in names:
                # A channel per queue: on RabbitMQ a passive declare of a missing queue
                # closes its channel.
                channel = conn.channel()
                try:
                    _, messages, _ = Queue(name, channel=channel).queue_declare(passive=True)
                except conn.channel_errors:
                    messages = 0
                finally:
                    try:
                        channel.close()
                    except Exception:  # already closed by the broker
                        pass
                depths[name] = int(messages)
    except Exception as exc:
        error = f"{type(exc).__name__}: {str(exc).strip()[:200]}"
        log.warning("could not read the broker's queue depths: %s", error)
        return None, error
    return depths, ""


def step_queue_depth() -> int | None:
    """Messages waiting in the steps' queue (settings.CELERY_TASK_DEFAULT_QUEUE), or None
    if the broker cannot be read: the sweeper then goes by the rows alone."""
    name = settings.CELERY_TASK_DEFAULT_QUEUE
    depths, _ = queue_depths([name])
    return None if depths is None else depths[name]
