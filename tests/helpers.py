"""Small helpers shared by the worker tests."""

from django_jobs.models import Job
from django_jobs.worker.loop import Worker
from django_jobs.worker.options import WorkerOptions


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
