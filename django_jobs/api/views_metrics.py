"""``GET /metrics/jobs`` (JSON, or Prometheus text with ``?format=prometheus``) and
``GET /openapi.json``."""

from __future__ import annotations

import re
from datetime import timedelta

from django.http import HttpRequest, HttpResponse

from .auth import READ, endpoint
from .errors import ApiError, json_response
from .metrics import PROMETHEUS_CONTENT_TYPE, job_metrics, prometheus_text
from .openapi import openapi_document

METRICS_PARAMETERS = ("window", "format")
WINDOW_RE = re.compile(r"^(\d{1,9})([smhd]?)$")
UNIT_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_WINDOW = timedelta(days=3650)


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
    """``3600``, ``90s``, ``15m``, ``24h`` or ``7d``; None for every job in the table."""
    if text is None:
        return None
    match = WINDOW_RE.match(text)
    if not match or int(match[1]) == 0:
        raise ApiError.bad_request(
            "window", f"must be a positive number of seconds or e.g. 15m, 24h, 7d, not {text!r}"
        )
    window = timedelta(seconds=int(match[1]) * UNIT_SECONDS[match[2]])
    if window > MAX_WINDOW:
        raise ApiError.bad_request("window", "must be at most 3650 days")
    return window


@endpoint({"GET": READ})
def openapi(request: HttpRequest) -> HttpResponse:
    return json_response(openapi_document(request.build_absolute_uri("./").rstrip("/")))
