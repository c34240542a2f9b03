"""The Celery app. The broker only delivers hints ("step N may be ready"); every
fact lives in PostgreSQL, so settings here favour redelivery over loss."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("durable_runs")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
