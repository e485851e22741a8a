"""``GET /queues``, ``POST /queues/<name>/pause`` and ``/resume``: the queues and their pauses,
as the admin's overview and ``manage.py jobs pause`` change them.

A pause is a row of ``QueueState``; workers read the paused set at every heartbeat, so a pause
takes effect within ``HEARTBEAT_SECONDS`` on every worker (a job already running finishes).
The queues listed are those with such a row and those a live worker takes from.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse

from django_jobs.api.auth import QUEUES, READ, endpoint
from django_jobs.api.errors import ApiError, json_response
from django_jobs.core.validation import QUEUE_RE
from django_jobs.models import QueueState


@endpoint({"GET": READ})
def queues(request: HttpRequest) -> HttpResponse:
    return json_response({"queues": QueueState.objects.known()}, 200)


def _name(name: str) -> str:
    if not QUEUE_RE.fullmatch(name):
        raise ApiError(400, f"{name!r} is not a queue name: 1 to 100 letters, digits, "
                       "'_', '.' or '-'", {"name": "not a queue name"})
    return name


@endpoint({"POST": QUEUES})
def pause(request: HttpRequest, name: str) -> HttpResponse:
    """200 with the queue, paused; ``changed`` is False if it was paused already."""
    changed = QueueState.objects.pause(_name(name))
    return json_response({"name": name, "paused": True, "changed": changed}, 200)


@endpoint({"POST": QUEUES})
def resume(request: HttpRequest, name: str) -> HttpResponse:
    """200 with the queue, running; ``changed`` is False if it was not paused."""
    changed = QueueState.objects.resume(_name(name))
    return json_response({"name": name, "paused": False, "changed": changed}, 200)
