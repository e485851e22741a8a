"""``current_job()`` is the running job in its handler and wherever the handler's context goes
(``job_started`` receivers, ``async_to_sync``/``sync_to_async``), and None everywhere else:
outside a worker, in a thread the handler starts, and in ``job_finished`` receivers."""

import pytest

from django_jobs import current_job
from django_jobs.models import Job
from django_jobs.signals import job_finished, job_started
from tests.helpers import run_burst

pytestmark = pytest.mark.django_db(transaction=True)


def test_current_job_is_the_running_job_in_its_context_only():
    seen: dict[str, object] = {}

    def started(sender, job, **kwargs):
        seen["started"] = current_job()

    def finished(sender, job, **kwargs):
        seen["finished"] = current_job()

    job_started.connect(started, sender=Job)
    job_finished.connect(finished, sender=Job)
    try:
        job = Job.enqueue("where_current")
        assert current_job() is None  # outside a worker
        run_burst()
    finally:
        job_started.disconnect(started, sender=Job)
        job_finished.disconnect(finished, sender=Job)
    job.refresh_from_db()
    assert job.status == "completed", job.error
    assert job.result == {"handler": job.public_id, "thread": None,
                          "async_to_sync": job.public_id}
    assert seen["started"] == job and seen["finished"] is None
    assert current_job() is None
