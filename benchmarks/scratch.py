"""Scratch PostgreSQL databases for the benchmarks that configure Django themselves.

PGHOST, PGPORT and PGUSER say where PostgreSQL is (127.0.0.1:5432, postgres by default).
"""

from __future__ import annotations

import os
import time
from typing import Any

import django
import psycopg
from django.conf import settings

HOST = os.environ.get("PGHOST", "127.0.0.1")
PORT = os.environ.get("PGPORT", "5432")
USER = os.environ.get("PGUSER", "postgres")


def recreate_database(name: str) -> None:
    """Drop the database ``name`` if it exists and create it empty."""
    with psycopg.connect(host=HOST, port=PORT, user=USER, dbname="postgres",
                         autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')


def configure(name: str, apps: list[str], **extra: Any) -> None:
    """Configure Django on the database ``name`` with django_jobs and ``apps``, then set up."""
    settings.configure(
        DATABASES={"default": {"ENGINE": "django.db.backends.postgresql", "NAME": name,
                               "USER": USER, "HOST": HOST, "PORT": PORT}},
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_jobs",
                        *apps],
        USE_TZ=True,
        DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        **extra,
    )
    django.setup()


def claim_and_finish(limit: int = 10) -> tuple[float, float] | None:
    """Claim up to ``limit`` ready jobs and finish them all as completed, through the
    manager's verbs: the seconds the claim and the finish took, or None if none was ready."""
    from django.utils import timezone

    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import Job

    start = time.perf_counter()
    jobs = Job.objects.claim(worker_id="bench", limit=limit, lease_seconds=30)
    if not jobs:
        return None
    claimed = time.perf_counter()
    now = timezone.now()
    Job.objects.finish([AttemptOutcome(job=job, kind="completed", started_at=now,
                                       finished_at=now) for job in jobs])
    return claimed - start, time.perf_counter() - claimed
