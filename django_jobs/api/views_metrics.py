"""``GET /metrics/jobs`` (JSON, or Prometheus text with ``?format=prometheus``) and
``GET /openapi.json``."""

from __future__ import annotations

from datetime import timedelta

from django.http import HttpRequest, HttpResponse

from django_jobs.api.auth import DOCUMENT, READ, endpoint
from django_jobs.api.constraints import WINDOW_MAX_LENGTH, window_seconds
from django_jobs.api.errors import ApiError, json_response
from django_jobs.api.metrics import PROMETHEUS_CONTENT_TYPE, job_metrics, prometheus_text
from django_jobs.api.openapi import openapi_document

METRICS_PARAMETERS = ("window", "format")


@endpoint({"GET": READ})
def metrics(request: HttpRequest) -> HttpResponse:
    unknown = sorted(set(request.GET) - set(METRICS_PARAMETERS))
    if unknown:
        raise ApiError(400, f"unknown parameter(s): {', '.join(unknown)}",
                       {name: "unknown parameter" for name in unknown})
    output = request.GET.get("format", "json")
    if output not in ("json", "prometheus"):
        raise ApiError.bad_request("format", f"must be json or prometheus, not {output!r}")
    data = job_metrics(parse_window(request.GET.get("window")))
    if output == "prometheus":
        return HttpResponse(prometheus_text(data), content_type=PROMETHEUS_CONTENT_TYPE)
    return json_response(data)


def parse_window(text: str | None) -> timedelta | None:
    """``3600``, ``90s``, ``15m``, ``24h`` or ``7d``; None for every job in the table.

    A window longer than ``MAX_WINDOW`` (3650 days) counts as ``MAX_WINDOW``.
    """
    if text is None:
        return None
    seconds = window_seconds(text)
    if seconds is None:
        raise ApiError.bad_request(
            "window", "must be a positive whole number of seconds, or of s, m, h or d (e.g. "
            f"15m, 24h, 7d), at most {WINDOW_MAX_LENGTH} characters, not {text[:40]!r}"
        )
    return timedelta(seconds=seconds)


@endpoint({"GET": DOCUMENT})
def openapi(request: HttpRequest) -> HttpResponse:
    return json_response(openapi_document(request.build_absolute_uri("./").rstrip("/")))
