"""Plain Celery, for comparison: a no-op task through the project's own Celery
settings (broker, acks_late, prefetch 1, the Django fixup), run by the same prefork
worker. The task only counts itself in Redis so the bench knows when all ran."""

from __future__ import annotations

import os
import time

import redis
from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("bench_noop")
app.config_from_object("django.conf:settings", namespace="CELERY")

_redis: redis.Redis | None = None


@app.task(name="bench.noop", acks_late=True, ignore_result=True)
def noop(counter: str) -> None:
    global _redis
    if _redis is None:
        # Celery's redis+socket:// (the embedded Redis) is redis-py's unix://.
        url = str(app.conf.broker_url).replace("redis+socket://", "unix://", 1)
        _redis = redis.Redis.from_url(url)
    pipe = _redis.pipeline(transaction=False)
    pipe.incr(counter)
    pipe.set(f"{counter}:last", repr(time.time()))
    pipe.set(f"{counter}:first", repr(time.time()), nx=True)
    pipe.execute()
