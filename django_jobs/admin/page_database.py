"""Which database an admin page reads.

The job list (with its filters, search, counts and the strip above it) and the overview read the
replica the site names in ``READ_REPLICA`` (``engine/read_replica.py``) when they only look: a GET
or HEAD. A POST to the list runs an action on the selected jobs and a POST to the overview pauses a
queue; those read and write the jobs' database, as do the job page and its buttons, which must show
the job as the primary holds it before a retry or a cancel.

A request reads one alias throughout. If the replica raises a database error while a page is
made from it, the replica is set aside and the whole page is made again from the primary
(``looking``), with a note saying so (``replica_note``).
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse

from django_jobs.engine import read_replica
from django_jobs.models.schema import jobs_database

LOOKING = ("GET", "HEAD")
_ALIAS = "_django_jobs_read_alias"


def list_database(request: HttpRequest) -> str:
    """The alias a list or overview request reads: the replica for a GET or HEAD (unless it
    is set aside), else the jobs' database; the same for the whole request."""
    alias = getattr(request, _ALIAS, None)
    if alias is None:
        alias = read_replica.read_database() if request.method in LOOKING else jobs_database()
        setattr(request, _ALIAS, alias)
    return alias


def looking(request: HttpRequest, page: Callable[[], HttpResponse]) -> HttpResponse:
    """``page()``, rendered; made again from the jobs' database if the replica it read failed."""
    try:
        return _rendered(page())
    except DatabaseError as exc:
        replica = read_replica.replica_alias()
        if replica is None or getattr(request, _ALIAS, None) != replica:
            raise
        read_replica.failed(replica, exc)
    setattr(request, _ALIAS, jobs_database())
    return _rendered(page())


def replica_note(request: HttpRequest) -> str | None:
    """What the page says when it read the primary in place of the replica, else None."""
    replica = read_replica.replica_alias()
    if replica is None or list_database(request) == replica or request.method not in LOOKING:
        return None
    fallback = read_replica.fallback()
    if fallback is None:
        return None
    return (f"Read from the jobs' database: the replica {fallback.replica!r} {fallback.reason}. "
            f"The page goes back to it within {fallback.remaining():.0f} s.")


def _rendered(response: HttpResponse) -> HttpResponse:
    render = getattr(response, "render", None)
    if render is not None and not getattr(response, "is_rendered", True):
        render()
    return response
