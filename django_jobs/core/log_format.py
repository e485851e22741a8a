"""A JSON log formatter: one object per line, with the job fields the worker attaches.

LOGGING = {"formatters": {"json": {"()": "django_jobs.core.log_format.JSONFormatter"}}, ...}
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

EXTRA_FIELDS = ("worker_id", "job_id", "job_type", "job_queue", "attempt", "duration_ms",
                "outcome", "event", "jobs", "seconds", "outcomes", "reason", "next")


class JSONFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data = {
            "timestamp": datetime.fromtimestamp(record.created, UTC).isoformat(
                timespec="milliseconds"
            ).replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for name in EXTRA_FIELDS:
            if hasattr(record, name):
                data[name] = getattr(record, name)
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)
