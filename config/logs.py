"""Log formats: one JSON object per line in production (LOG_FORMAT=json, the default
when DEBUG is off), plain text in development. Both carry the context of
runs/ops/logcontext.py (request id and user, or run id, step, attempt and worker), and,
with tracing on, the current span's trace_id and span_id (docs/operating.md#tracing)."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

from django.http import HttpRequest

from runs.ops import tracing
from runs.ops.logcontext import current

CONTEXT_KEYS = (
    "request_id",
    "user",
    "run_id",
    "step",
    "attempt",
    "worker",
    "trace_id",
    "span_id",
)
# LogRecord's own attributes: anything else on a record came from `extra=`.
_RECORD_KEYS = set(vars(logging.makeLogRecord({}))) | {
    "message",
    "asctime",
    "context",
    "context_text",
}


class ContextFilter(logging.Filter):
    """Copy the bound context onto the record (as `record.context`, and as a
    ` [run_id=… step=…]` suffix for the plain format)."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = current()
        ids = tracing.current_ids()  # None at once while tracing is off
        if ids is not None:
            fields = {**fields, "trace_id": ids[0], "span_id": ids[1]}
        record.context = fields
        record.context_text = (
            " [" + " ".join(f"{k}={fields[k]}" for k in CONTEXT_KEYS if k in fields) + "]"
            if fields
            else ""
        )
        return True


def _without_query(value: Any) -> Any:
    """Django's request logger (a 4xx or 5xx answer) passes the request, whose text is
    its whole URL: its method and path only. A query string may hold a search value,
    personal data, which no log keeps (docs/operating.md, "In front of the web tier")."""
    if isinstance(value, HttpRequest):
        return f"{value.method} {value.path}"
    return value


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(getattr(record, "context", None) or current())
        for key, value in vars(record).items():
            if key not in _RECORD_KEYS and key not in entry and not key.startswith("_"):
                entry[key] = _without_query(value)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)
