"""Handlers of the tracing tests (tests/worker/test_tracing.py)."""

from django_jobs import current_job, enqueue_after_success, handler
from django_jobs.models import Job


class FirstAttemptFails(Exception):
    pass


@handler("traced_retry", max_attempts=3)
def traced_retry(payload):
    """Fails its first attempt; the second enqueues a job at once and a follow-up."""
    job = current_job()
    if job.attempt == 1:
        raise FirstAttemptFails("the first attempt fails")
    Job.enqueue("noop", {"from": "handler"}, queue="traced")
    enqueue_after_success("noop", {"from": "follow-up"}, queue="traced")
    return {"attempt": job.attempt}


@handler("traced_parent")
def traced_parent(payload):
    """Enqueues one job from inside the handler."""
    Job.enqueue("noop", {"from": "parent"}, queue="traced")


@handler("follows_up")
def follows_up(payload):
    """Asks for a follow-up."""
    enqueue_after_success("noop", {"from": "follow-up"})


@handler("traced_follows_up")
def traced_follows_up(payload):
    """Asks for a follow-up on the ``traced`` queue."""
    enqueue_after_success("noop", {"from": "follow-up"}, queue="traced")
