"""``POST /jobs/<job_id>/cancel`` and ``/retry``: the same queryset verbs the admin uses."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from django_jobs.api.auth import CANCEL, RETRY, endpoint
from django_jobs.api.errors import ApiError, json_response
from django_jobs.api.views_jobs import find_job, job_url
from django_jobs.core.job_json import job_json
from django_jobs.models import Job


@endpoint({"POST": CANCEL})
def cancel(request: HttpRequest, job_id: str) -> HttpResponse:
    """200 when canceled; 202 when a running job was asked to stop; 409 when it has ended."""
    job = find_job(job_id)
    changed = job.cancel()
    if job.status == Job.Status.PROCESSING and job.cancel_requested:
        return _answer(request, job, 202)
    if not changed:
        raise ApiError(409, f"job {job_id} is {job.status}: only pending, failed or processing "
                       "jobs can be canceled", {"status": job.status})
    return _answer(request, job, 200)


@endpoint({"POST": RETRY})
def retry(request: HttpRequest, job_id: str) -> HttpResponse:
    """200 with the job, pending again; 409 unless it was dead, failed or canceled."""
    job = find_job(job_id)
    if not job.retry():
        raise ApiError(409, f"job {job_id} is {job.status}: only dead, failed or canceled jobs "
                       "can be retried", {"status": job.status})
    return _answer(request, job, 200)


def _answer(request: HttpRequest, job: Job, status: int) -> HttpResponse:
    return json_response(job_json(job, url=job_url(request, job.public_id),
                                  attempts=list(job.attempts.all())), status)
