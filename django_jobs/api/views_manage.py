"""``POST /jobs/<job_id>/cancel`` and ``/retry``: the same queryset verbs the admin uses.

Each acts on the job as it is when its transaction holds the job's row (``engine/staff.py``)
and answers with what it left. Another action at the same moment is answered as that order
says: 409 if the job is no longer in a state the action applies to, 404 if it was deleted, and
409 if the two met head on (``JobConflict``), with nothing changed."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from django_jobs.api.auth import CANCEL, RETRY, endpoint
from django_jobs.api.errors import ApiError, json_response
from django_jobs.api.views_jobs import find_job, job_url
from django_jobs.core.job_json import job_json
from django_jobs.exceptions import JobConflict
from django_jobs.models import Job


@endpoint({"POST": CANCEL})
def cancel(request: HttpRequest, job_id: str) -> HttpResponse:
    """200 when canceled; 202 when a running job was asked to stop; 409 when it has ended."""
    job = find_job(job_id)
    changed = _act(job, job_id, Job.cancel)
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
    if not _act(job, job_id, Job.retry):
        raise ApiError(409, f"job {job_id} is {job.status}: only dead, failed or canceled jobs "
                       "can be retried", {"status": job.status})
    return _answer(request, job, 200)


def _act(job: Job, job_id: str, verb: Callable[[Job], bool]) -> bool:
    """``verb(job)``; a job deleted meanwhile is a 404, an action met head on a 409."""
    try:
        return verb(job)
    except Job.DoesNotExist:
        raise ApiError(404, f"there is no job {job_id}", {"job_id": "not found"}) from None
    except JobConflict as exc:
        raise ApiError(409, f"job {job_id}: {exc}; try again",
                       {"job_id": "changed by another action at the same moment"}) from None


def _answer(request: HttpRequest, job: Job, status: int) -> HttpResponse:
    return json_response(job_json(job, url=job_url(request, job.public_id),
                                  attempts=list(job.attempts.all())), status)
