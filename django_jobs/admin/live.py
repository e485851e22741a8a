"""Live pages: the job list, a job's page and the overview refresh themselves while their tab is
visible, without a JavaScript build.

A page polls ``live/`` (``admin_live.js``), a small JSON answer: a **version** of what the page
shows, and the interval to poll at. Only when the version changes does the page fetch itself
again and swap in its new content, so a quiet queue costs one small read per interval. The
version of the list and of the overview is read once per interval per process and per database
and cached (Django's default cache): a hundred open tabs cost the database the same as one. It
reads where the page reads (``READ_REPLICA`` for a GET, where set). A version that took long to
read doubles the interval it asks for (up to ``MAX_SECONDS``); the script also backs off on its
own when answers are slow or fail, and stops while its tab is hidden.

``ADMIN_REFRESH_SECONDS`` sets the interval; 0 turns live refresh off (the pages then carry no
script and ``live/`` answers 404).
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from django.core.cache import cache
from django.db.models import Max, Sum
from django.http import Http404, JsonResponse

from django_jobs.admin import overview_figures
from django_jobs.admin.page_database import list_database
from django_jobs.admin.requests import job_pk
from django_jobs.core import clock
from django_jobs.core.settings import jobs_settings
from django_jobs.models import Job, JobStat, Worker
from django_jobs.models.schema import jobs_database
from django_jobs.models.stats import MINUTE

if TYPE_CHECKING:
    from django.http import HttpRequest

MAX_SECONDS = 60  # the longest interval a slow version asks for
SLOW_SECONDS = 0.5  # a version that took longer than this doubles the interval
KINDS = ("list", "overview", "job")


def interval() -> float:
    """The polling interval in seconds; 0 when live refresh is off."""
    return float(jobs_settings.ADMIN_REFRESH_SECONDS or 0)


def version_of_queue(using: str) -> dict[str, Any]:
    """What the list and the overview show, in a few index-only reads: the strip's counts
    (which move as jobs are claimed and finish), the newest job, the finishes counted in the
    last minutes and the workers' rows."""
    now = clock.now(using)
    figures = overview_figures.summary(now=now, using=using)
    recent = now.replace(second=0, microsecond=0)
    finished = JobStat.objects.using(using).filter(span=MINUTE, bucket__gte=recent).aggregate(
        n=Sum("count"))["n"]
    return {
        "dead": figures["dead"], "processing": figures["processing"],
        "ready": figures["ready"],
        "newest": Job.objects.using(using).aggregate(n=Max("pk"))["n"],
        "finished": finished,
        "workers": sorted(Worker.objects.using(using).values_list("worker_id", flat=True)),
    }


def version_of_job(pk: int, using: str) -> dict[str, Any]:
    """What a job's page shows that moves: its row's changing fields, by primary key."""
    row = Job.objects.using(using).filter(pk=pk).values(
        "status", "attempt", "updated_at", "run_at", "progress", "cancel_requested").first()
    if row is None:
        raise Http404("no such job")
    return dict(row)


def digest(figures: dict[str, Any]) -> str:
    text = json.dumps(figures, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=8).hexdigest()


def live_view(request: HttpRequest) -> JsonResponse:
    """``{"version": ..., "interval": seconds}`` for the page ``?page=list|overview|job``
    (``&job=<id>`` for a job's page)."""
    seconds = interval()
    kind = request.GET.get("page", "")
    if not seconds or kind not in KINDS:
        raise Http404("no live page of that name")
    using = list_database(request) if kind != "job" else jobs_database()
    pk = None
    if kind == "job":
        pk = job_pk(request.GET.get("job", ""))
        if pk is None:
            raise Http404("no such job")
        key = f"django_jobs:admin-live:job:{using}:{pk}"
    else:
        key = f"django_jobs:admin-live:queue:{using}"
    answer = cache.get(key)
    if answer is None:
        started = time.monotonic()
        figures = version_of_job(pk, using) if pk is not None else version_of_queue(using)
        took = time.monotonic() - started
        ask = min(MAX_SECONDS, seconds * 2) if took > SLOW_SECONDS else seconds
        answer = {"version": digest(figures), "interval": ask}
        cache.set(key, answer, timeout=max(1, int(ask)))
    return JsonResponse(answer)  # the admin's views are never cached by the browser


# The parts of each page a change swaps in (CSS selectors): the list keeps its filters'
# open and closed sections and its search box as the user left them.
REGIONS = {
    "list": "#result_list,.dj-jobs-summary,p.paginator",
    "overview": "#content-main",
    "job": "#content-main",
}


def page_context(url: str, kind: str, job: object = None) -> dict[str, Any]:
    """What ``live.html`` needs on a page; nothing when live refresh is off. ``url`` is the
    ``live/`` view's address on the admin site the page is on."""
    seconds = interval()
    if not seconds:
        return {}
    query = f"?page={kind}" + (f"&job={job}" if job is not None else "")
    return {"live_url": url + query, "live_interval": seconds, "live_regions": REGIONS[kind]}
