"""Small helpers shared by the tests: claiming jobs, running in-process workers, and plan
tests' statistics."""

from contextlib import contextmanager

from django.db import connection

from django_jobs.models import Job
from django_jobs.worker.loop import Worker
from django_jobs.worker.options import WorkerOptions


def claim(limit: int = 10, *, worker_id: str = "w1", lease_seconds: float = 30.0,
          **options) -> list[Job]:
    """Claim up to ``limit`` ready jobs for ``worker_id`` through the worker's own claim
    (``Job.objects.claim``); ``options`` are its other arguments (queues, exclude_queues...)."""
    return Job.objects.claim(worker_id=worker_id, limit=limit, lease_seconds=lease_seconds,
                             **options)


def run_burst(**options) -> int:
    """Run an in-process worker until nothing is ready; returns the jobs it ran."""
    options.setdefault("concurrency", 2)
    options.setdefault("poll_interval", 0.05)
    return Worker(WorkerOptions(burst=True, **options)).run()


def run_until_settled(job: Job, *, rounds: int = 10, **options) -> Job:
    """Run burst workers, making backing-off jobs due at once (no sleeping), until it settles."""
    for _ in range(rounds):
        run_burst(**options)
        job.refresh_from_db()
        if job.status not in (Job.Status.PENDING, Job.Status.FAILED):
            return job
        Job.objects.filter(pk=job.pk).run_now()
    return job


@contextmanager
def analyzed_jobs():
    """The jobs table analyzed with the rows a plan test added; on leaving, emptied and analyzed
    again. ANALYZE writes the table's size to pg_class in place, which the test's rollback
    leaves: without this, the tests after it would plan for the rows it added."""
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_jobs_job")
    yield
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM django_jobs_job")
        cursor.execute("ANALYZE django_jobs_job")


def seq_scans_of_rows(plan: str) -> list[str]:
    """The ``Seq Scan`` lines of a text plan, but those of an empty partition of PostgreSQL's
    partitioned jobs or attempts table (migration 0028: a day's or the kept one, holding no
    row in a test), which the planner rightly reads whole: there is nothing to read."""
    import re

    from django.db import connection

    found = []
    for line in plan.splitlines():
        if "Seq Scan" not in line:
            continue
        match = re.search(r"Seq Scan on (django_jobs_(?:job|jobattempt)_(?:\d{8}|kept))\b", line)
        if match:
            with connection.cursor() as cursor:
                cursor.execute(f"SELECT EXISTS (SELECT 1 FROM {match.group(1)})")
                if not cursor.fetchone()[0]:
                    continue
        found.append(line)
    return found
