"""Settings, read lazily from ``settings.DJANGO_JOBS`` and read again when it changes, so
``override_settings`` works."""

from __future__ import annotations

import logging
from typing import Any

from django.conf import settings as django_settings
from django.core.signals import setting_changed

from django_jobs.core.states import CANCELED, COMPLETED, DEAD

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
    # Every process judges time by the database server's clock (core/clock.py); one whose own
    # clock is off by more than this many seconds logs a warning. None: never warn.
    "CLOCK_SKEW_WARNING_SECONDS": 2.0,
    # PostgreSQL: a worker whose database's xmin horizon has been held back longer than this
    # many seconds (by a snapshot, a prepared transaction or a replication slot) logs one
    # warning naming the holder, and one line when it ends; the metrics and the admin overview
    # show it too. 0 or None: never warn.
    "HORIZON_WARNING_SECONDS": 300,
    # How long an idle worker waits before looking again (PostgreSQL wakes it sooner).
    "POLL_INTERVAL": 1.0,
    # How long a stopping worker lets running jobs finish before handing them back.
    "SHUTDOWN_TIMEOUT": 30.0,
    # Seconds a handler run with isolation="process" gets, after its timeout or its job's
    # cancel, to stop before its process is ended (worker/process_isolation.py).
    "KILL_GRACE": 10.0,
    "DEFAULT_QUEUE": "default",
    # Seconds a job whose type no worker has a handler for (a rolling deploy) waits for one,
    # handed back with a backoff and its attempt not spent, before it goes dead. 0: dead at once.
    "UNKNOWN_TYPE_GRACE": 3600.0,
    # Crashes (a worker process dying mid-job) a job may be part of before it goes dead, the
    # last one alone in its worker; a handler's max_crashes overrides it
    # (docs/explanation-guarantees.md).
    "MAX_CRASHES": 3,
    # What a crash does to the attempt: "retry" gives it back, "fail" counts it as failed.
    "ON_CRASH": "retry",
    # Largest payload and result, in bytes of their JSON text (UTF-8); None: no limit. A payload
    # past it is refused at enqueue; a result past it fails its attempt (the job goes dead).
    "MAX_PAYLOAD_BYTES": 1024 * 1024,
    "MAX_RESULT_BYTES": 1024 * 1024,
    # PostgreSQL: prepare the claim, finish and insert statements on each connection, so the
    # server plans them once instead of on every call. None: prepare them unless the
    # connection goes through a pooler that does not keep sessions (found out by itself, see
    # engine/postgres/pooler.py); True: always (PgBouncer 1.21+ with max_prepared_statements);
    # False: never.
    "PREPARED_STATEMENTS": None,
    # --- HTTP API and completion callbacks (django_jobs.api, django_jobs.features.callbacks) ---
    # Largest request body POST /jobs accepts, in bytes.
    "API_MAX_PAYLOAD_BYTES": 65536,
    # Page size of GET /jobs when the caller gives no limit, and the most it may ask for.
    "API_PAGE_SIZE": 50,
    "API_MAX_PAGE_SIZE": 200,
    # Seconds an Idempotency-Key is remembered after the job it created.
    "IDEMPOTENCY_TTL": 86400,
    # Hosts a callback_url may name, as in ALLOWED_HOSTS ("api.example.com", ".example.com").
    # Empty: callbacks are refused.
    "CALLBACK_ALLOWED_HOSTS": [],
    # The HMAC-SHA256 key callbacks are signed with; callbacks are refused while it is empty.
    "CALLBACK_SECRET": "",
    # Seconds one delivery may take, and the attempts and delays (seconds) between them.
    "CALLBACK_TIMEOUT": 10.0,
    "CALLBACK_MAX_ATTEMPTS": 8,
    "CALLBACK_BACKOFF": [10, 30, 120, 600, 1800, 3600, 7200],
    "CALLBACK_QUEUE": "default",
    # How long finished jobs are kept, by status (seconds, a timedelta, or None = for
    # ever), for ``manage.py prunejobs`` and the workers' automatic pruning.
    "RETENTION": {COMPLETED: 7 * 86400, CANCELED: 7 * 86400, DEAD: 30 * 86400},
    # Seconds between automatic prune passes by each worker; None or 0 turns it off. Five
    # minutes: a pass costs a read per status even with nothing to delete, and a table five
    # minutes behind its RETENTION is the same size within a fraction of a percent; a pass
    # that has more to delete than its time allows goes on at the next heartbeat
    # (features/retention.py, docs/howto-retention.md).
    "PRUNE_INTERVAL": 300,
    # Rows deleted per prune transaction.
    "PRUNE_BATCH_SIZE": 500,
    # Count finished jobs per minute, worker, queue, type and outcome, with their wait and run
    # time, kept by the worker once the outcomes commit and written at its heartbeat
    # (engine/finish_counts.py): the admin overview's charts read them. False: nothing is counted
    # and the charts are empty.
    "STATS": True,
    # How long those counts are kept (seconds or a timedelta); pruned with the jobs.
    "STATS_RETENTION": 2 * 86400,
    # Levels of the worker's lines for jobs that did not complete, by outcome ("failed" for a
    # failure that is retried, "snoozed", "canceled", "dead", "refused"), as names or numbers;
    # a site's dict overrides these entries one by one. ERROR is what error trackers report.
    "LOG_LEVELS": {"failed": "WARNING", "snoozed": "WARNING", "canceled": "WARNING",
                   "dead": "ERROR", "refused": "ERROR"},
    # Error trackers (django_jobs.features.sentry): send the job's payload with its event, and
    # the handler's local variables (which hold what it loaded from the payload). False: the
    # event has the job's id, type, queue, attempt and error, and no frame's variables.
    "ERROR_TRACKER_PAYLOAD": False,
    # An alias of DATABASES that replicates the jobs' database: the admin's job list, its
    # overview, the API's GET /jobs and its metrics read there; writes, the workers and the
    # pages that act (a job's page and buttons, the admin's actions) stay on the primary
    # (engine/read_replica.py). None: everything reads the jobs' database.
    "READ_REPLICA": None,
    # PostgreSQL: a READ_REPLICA behind the primary by more than this many seconds (read at most
    # every 5 s) is set aside like one that fails. None: never judge its lag.
    "READ_REPLICA_MAX_LAG_SECONDS": 60,
    # How long the pages read the jobs' database after READ_REPLICA failed or fell behind,
    # before they try it again.
    "READ_REPLICA_FALLBACK_SECONDS": 30,
    # Seconds between the admin's live pages' polls (the job list, a job's page, the
    # overview: admin/live.py); 0 turns live refresh off.
    "ADMIN_REFRESH_SECONDS": 5,
    # Recurring jobs, {name: {"type": ..., "cron": ... | "every": ..., ...}}.
    "SCHEDULES": {},
}


class Settings:
    """Attribute access to the merged settings. A value read is kept as the instance's
    attribute, so that reading it again (an enqueue reads two) calls no code; all are
    forgotten when Django says ``DJANGO_JOBS`` changed (``override_settings``, the ``settings``
    fixture: ``setting_changed``)."""

    def __getattr__(self, name: str) -> Any:  # each setting is of its own type
        if name not in DEFAULTS:
            raise AttributeError(f"django-jobs has no setting {name!r}")
        user = getattr(django_settings, "DJANGO_JOBS", {}) or {}
        value = self.__dict__[name] = user.get(name, DEFAULTS[name])
        return value

    def forget(self) -> None:
        """Read every setting from ``DJANGO_JOBS`` again on its next use."""
        self.__dict__.clear()


jobs_settings = Settings()


def level_for(outcome: str) -> int:
    """The level of the line that reports an outcome (``failed`` for a retried failure,
    ``dead``, ``refused``...): the site's ``LOG_LEVELS`` entry for it, else the default one.
    Error trackers report the outcomes at ERROR and above."""
    level = (jobs_settings.LOG_LEVELS or {}).get(outcome)
    if level is None:
        level = DEFAULTS["LOG_LEVELS"].get(outcome, "WARNING")
    return level if isinstance(level, int) else logging.getLevelName(str(level).upper())


def _changed(*, setting: str, **kwargs: object) -> None:
    if setting == "DJANGO_JOBS":
        jobs_settings.forget()


setting_changed.connect(_changed)
