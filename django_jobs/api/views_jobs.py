"""``/jobs``: submit (POST), list with filters (GET), and one job (GET /jobs/<job_id>)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse, QueryDict
from django.urls import reverse

from django_jobs.api.auth import READ, SUBMIT, caller_of, endpoint
from django_jobs.api.constraints import JOB_ID, instant, matches, page_size
from django_jobs.api.errors import ApiError, json_response
from django_jobs.api.idempotency import check_key, submit_once
from django_jobs.api.pagination import Cursor, paginate
from django_jobs.api.submission import enqueue_arguments, read_body
from django_jobs.core import tracing
from django_jobs.core.job_json import iso, job_json
from django_jobs.core.outcomes import stored
from django_jobs.core.settings import jobs_settings
from django_jobs.engine import read_replica
from django_jobs.exceptions import InvalidJob
from django_jobs.models import Job
from django_jobs.models.newest import bounded_if_rare
from django_jobs.models.updated import updated_since

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject
    from django_jobs.models.managers import JobQuerySet

LIST_PARAMETERS = ("status", "type", "queue", "since", "limit", "cursor")


@endpoint({"GET": READ, "POST": SUBMIT})
def jobs(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        return submit(request)
    return job_list(request)


def submit(request: HttpRequest) -> HttpResponse:
    data = read_body(request)
    submitted = enqueue_arguments(data)

    def create() -> Job:
        try:
            # A traceparent header (W3C Trace Context) makes the enqueue part of the caller's
            # trace; a malformed one is ignored, as the standard asks
            with tracing.from_headers(request.headers):
                return Job.enqueue(submitted.type, submitted.payload, **submitted.options)
        except InvalidJob as exc:
            raise ApiError.from_invalid_job(exc) from None

    key = request.headers.get("Idempotency-Key")
    if key is None:
        public_id, replayed = create().public_id, False
    else:
        public_id, replayed = submit_once(caller_of(request).owner, check_key(key), data,
                                          create)
    url = job_url(request, public_id)
    headers = {"Location": url}
    if replayed:
        headers["Idempotent-Replayed"] = "true"
    return json_response({"job_id": public_id, "url": url}, 200 if replayed else 201,
                         headers=headers)


def job_list(request: HttpRequest) -> HttpResponse:
    query = request.GET
    unknown = sorted(set(query) - set(LIST_PARAMETERS))
    if unknown:
        raise ApiError(400, f"unknown parameter(s): {', '.join(unknown)}",
                       {name: "unknown parameter" for name in unknown})
    if any("\x00" in value for values in query.lists() for value in values[1]):
        raise ApiError(400, "parameters must not contain NUL characters", {"query": "NUL"})
    cursor = Cursor.decode(query["cursor"]) if "cursor" in query else None
    limit = _limit(query.get("limit"))

    def body(using: str) -> JSONObject:
        jobs, searched_since = filtered(query, using)
        page = paginate(jobs, cursor, limit)
        return {
            "results": [job_json(job, url=job_url(request, job.public_id))
                        for job in page.items],
            "next": _page_url(request, page.next),
            "previous": _page_url(request, page.previous),
            "searched_since": iso(searched_since) if searched_since is not None else None,
        }

    # Read from the replica if the site names one (READ_REPLICA), from the primary if it fails
    return json_response(read_replica.read(read_replica.read_database(), body))


def filtered(query: QueryDict, using: str | None = None) -> tuple[QuerySet, datetime | None]:
    """Jobs matching ``status`` (comma-separated), ``type``, ``queue`` and ``since``, read from
    ``using`` (``read_replica.read_database()`` if None); and, where a type or queue the planner
    expects few jobs of is looked for among the newest jobs only (``models/newest.py``), the
    ``created_at`` those start at, else None. ``since`` lifts that bound, as a period does in
    the admin: the list is then as long as the client asked for."""
    jobs, wanted = _of_states(Job.objects.using(using or read_replica.read_database()), query)
    for name in ("type", "queue"):
        if name in query:
            jobs = jobs.filter(**{name: query[name]})
    if "since" in query:
        return updated_since(jobs, _since(query.get("since", "")), wanted), None
    if "type" in query or "queue" in query:
        return bounded_if_rare(jobs)
    return jobs, None


def _of_states(jobs: JobQuerySet, query: QueryDict) -> tuple[QuerySet, list[str] | None]:
    """The jobs in the states ``status`` names (comma-separated), and those states; all the
    jobs and None without ``status``. A 400 names the first unknown state."""
    if "status" not in query:
        return jobs, None
    wanted = query.get("status", "").split(",")
    bad = [s for s in wanted if s not in Job.Status.values]
    if bad:
        raise ApiError.bad_request(
            "status", f"unknown status {_shown(bad[0])}; one of {', '.join(Job.Status.values)}"
        )
    return jobs.in_states(*wanted), wanted


@endpoint({"GET": READ})
def job_detail(request: HttpRequest, job_id: str) -> HttpResponse:
    job = find_job(job_id)
    return json_response(job_json(job, url=job_url(request, job.public_id),
                                  attempts=list(job.attempts.all())))


def find_job(job_id: str) -> Job:
    """The job with this public id; a string of another shape is not looked up at all.

    Read from the jobs' database, never a replica: a client polls the URL ``POST /jobs``
    gave it, and a replica behind the primary would answer 404 for a job just created."""
    job = Job.objects.filter(public_id=job_id).first() if matches(JOB_ID, job_id) else None
    if job is None:
        raise ApiError(404, f"there is no job {_shown(job_id)}", {"job_id": "not found"})
    return job


def job_url(request: HttpRequest, public_id: str) -> str:
    return request.build_absolute_uri(reverse("django_jobs_api:job-detail", args=[public_id]))


def _since(text: str) -> datetime:
    when = instant(text)  # in UTC: databases refuse some offsets (PostgreSQL: beyond ±15:59)
    if when is None:
        raise ApiError.bad_request(
            "since", "must be an RFC 3339 date and time with a time zone, e.g. "
            f"2024-06-14T12:00:00Z (send + as %2B), not {_shown(text)}"
        )
    return stored(when)


def _limit(text: str | None) -> int:
    most = int(jobs_settings.API_MAX_PAGE_SIZE)
    if text is None:
        return min(int(jobs_settings.API_PAGE_SIZE), most)
    size = page_size(text, most)
    if size is None:
        raise ApiError.bad_request("limit", f"must be an integer from 1 to {most}, not "
                                   f"{_shown(text)}")
    return size


def _shown(text: str, most: int = 40) -> str:
    """``text`` quoted for an error message, shortened if long."""
    if len(text) <= most:
        return repr(text)
    return f"{text[:most]!r} (and {len(text) - most} more characters)"


def _page_url(request: HttpRequest, cursor: Cursor | None) -> str | None:
    if cursor is None:
        return None
    query = request.GET.copy()
    query["cursor"] = cursor.encode()
    return request.build_absolute_uri(f"{request.path}?{query.urlencode()}")
