"""Settings, read lazily from ``settings.DJANGO_JOBS`` so ``override_settings`` works."""

from __future__ import annotations

from typing import Any

from django.conf import settings as django_settings

DEFAULTS: dict[str, Any] = {
    # Attempts a job gets when neither its handler nor the enqueue call says.
    "MAX_ATTEMPTS": 3,
    # Exponential backoff: base * 2**(attempt - 1) seconds, capped, with jitter.
    "BACKOFF_BASE": 10.0,
    "BACKOFF_CAP": 3600.0,
    "BACKOFF_JITTER": True,
    # A fixed schedule of delays in seconds (the last repeats); overrides the three above.
    "BACKOFF_SCHEDULE": None,
    # How long a claim holds without a heartbeat before another worker rescues the job.
    "LEASE_SECONDS": 30.0,
    # How often a worker renews its leases and looks for jobs of lost workers.
    "HEARTBEAT_SECONDS": 5.0,
    # How long an idle worker waits before looking again (PostgreSQL wakes it sooner).
    "POLL_INTERVAL": 1.0,
    # How long a stopping worker lets running jobs finish before handing them back.
    "SHUTDOWN_TIMEOUT": 30.0,
    "DEFAULT_QUEUE": "default",
    # Logger name used for the per-job start and end lines.
    "LOGGER": "django_jobs.worker",
    # sched: how long finished jobs are kept, by status (seconds, a timedelta, or None = for
    # ever), for ``manage.py prunejobs`` and the workers' automatic pruning.
    "RETENTION": {"completed": 7 * 86400, "canceled": 7 * 86400, "dead": 30 * 86400},
    # sched: seconds between automatic prune passes by each worker; None turns it off.
    "PRUNE_INTERVAL": None,
    # sched: rows deleted per prune transaction.
    "PRUNE_BATCH_SIZE": 500,
    # sched: recurring jobs, {name: {"type": ..., "cron": ... | "every": ..., ...}}.
    "SCHEDULES": {},
}


class Settings:
    """Attribute access to the merged settings; nothing is cached."""

    def __getattr__(self, name: str) -> Any:
        if name not in DEFAULTS:
            raise AttributeError(f"django-jobs has no setting {name!r}")
        user = getattr(django_settings, "DJANGO_JOBS", {}) or {}
        return user.get(name, DEFAULTS[name])


jobs_settings = Settings()
