"""The OpenAPI 3.1 document of the API, built per request so it lists the registered types;
its component schemas are in ``openapi_schemas.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django_jobs.api.constraints import (
    CURSOR,
    IDEMPOTENCY_KEY,
    STATUS_LIST,
    WINDOW,
    WINDOW_MAX_LENGTH,
    schema_of,
)
from django_jobs.api.openapi_schemas import (
    JOB_ID_SCHEMA,
    NO_NUL,
    TIME,
    component_schemas,
    ref,
)
from django_jobs.core.settings import jobs_settings
from django_jobs.core.validation import QUEUE_RE

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject

CHALLENGE = {"WWW-Authenticate": {"schema": {"type": "string"},
                                  "description": 'Bearer realm="django-jobs"'}}


def _json(schema: JSONObject, description: str) -> JSONObject:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> JSONObject:
    words = {400: "Bad input; `errors` names each field", 401: "No or wrong credentials",
             403: "Not allowed (scope, permission or CSRF)", 404: "No such job",
             409: "Conflict with the job's state or an Idempotency-Key",
             415: "The body is not application/json"}
    answers = {str(code): _json(ref("Error"), words[code]) for code in codes}
    if 401 in codes:
        answers["401"]["headers"] = CHALLENGE
    return answers


def _path_id() -> JSONObject:
    return {"name": "job_id", "in": "path", "required": True, "schema": JOB_ID_SCHEMA,
            "description": "A job's id; any other string is a 404."}


QUEUE: JSONObject = {"type": "object", "required": ["name", "paused"],
                     "properties": {"name": {"type": "string"}, "paused": {"type": "boolean"}}}
QUEUE_CHANGE: JSONObject = {
    "type": "object", "required": ["name", "paused", "changed"],
    "properties": {"name": {"type": "string"}, "paused": {"type": "boolean"},
                   "changed": {"type": "boolean",
                               "description": "False if the queue was already so"}}}


def _queue_name() -> JSONObject:
    return {"name": "name", "in": "path", "required": True,
            "schema": {"type": "string", "pattern": QUEUE_RE.pattern},
            "description": "A queue's name: 1 to 100 letters, digits, '_', '.' or '-'; any "
                           "other string is a 400."}


def _query(name: str, schema: JSONObject, description: str) -> JSONObject:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}


def _paths() -> JSONObject:
    most = int(jobs_settings.API_MAX_PAGE_SIZE)
    location = {"Location": {"schema": {"type": "string"}, "description": "The job's URL."}}
    links = {name.capitalize(): {"operationId": f"{name}Job",
                                 "parameters": {"job_id": "$response.body#/job_id"}}
             for name in ("get", "cancel", "retry")}
    manage = {"200": _json(ref("JobDetail"), "The job after the change"),
              **_errors(401, 403, 404, 409)}
    return {
        "/jobs": {
            "post": {
                "operationId": "submitJob", "summary": "Submit a job",
                "security": [{"bearer": []}, {"session": []}],
                "parameters": [
                    {"name": "Idempotency-Key", "in": "header", "required": False,
                     "schema": schema_of(IDEMPOTENCY_KEY)},
                    # W3C Trace Context: the enqueue joins the caller's trace (otel extra)
                    {"name": "traceparent", "in": "header", "required": False,
                     "schema": {"type": "string"},
                     "description": "W3C Trace Context: the caller's span; ignored if malformed"},
                    {"name": "tracestate", "in": "header", "required": False,
                     "schema": {"type": "string"},
                     "description": "W3C Trace Context: vendor state, with a traceparent"},
                ],
                "requestBody": {"required": True, "content": {
                    "application/json": {"schema": ref("JobSubmission")}}},
                "responses": {
                    "201": {**_json(ref("Created"), "Created"), "headers": location,
                            "links": links},
                    "200": {**_json(ref("Created"), "The job this Idempotency-Key created"),
                            "headers": location, "links": links},
                    **_errors(400, 401, 403, 409, 415),
                },
            },
            "get": {
                "operationId": "listJobs", "summary": "Jobs, newest first, a page at a time",
                "parameters": [
                    _query("status", schema_of(STATUS_LIST),
                           "One status, or several separated by commas."),
                    _query("type", {"type": "string", "pattern": NO_NUL},
                           "Only jobs of this type. On PostgreSQL, a type with few jobs is "
                           "looked for among the newest jobs only, unless since is given "
                           "(searched_since in the response)."),
                    _query("queue", {"type": "string", "pattern": NO_NUL},
                           "Only jobs in this queue; bounded as type is."),
                    _query("since", TIME, "Only jobs updated at or after this time. Failed and "
                           "dead jobs are found by an index on PostgreSQL and SQLite."),
                    _query("limit", {"type": "integer", "minimum": 1, "maximum": most},
                           "Page size."),
                    _query("cursor", schema_of(CURSOR),
                           "From a previous page's next/previous."),
                ],
                "responses": {"200": _json(ref("JobPage"), "A page of jobs"),
                              **_errors(400, 401, 403)},
            },
        },
        "/jobs/{job_id}": {"get": {
            "operationId": "getJob", "summary": "One job with its attempts",
            "parameters": [_path_id()],
            "responses": {"200": _json(ref("JobDetail"), "The job"), **_errors(401, 403, 404)},
        }},
        "/jobs/{job_id}/cancel": {"post": {
            "operationId": "cancelJob", "summary": "Cancel a waiting job, or stop a running one",
            "parameters": [_path_id()],
            "responses": {**manage, "202": _json(ref("JobDetail"), "Asked the worker to stop")},
        }},
        "/jobs/{job_id}/retry": {"post": {
            "operationId": "retryJob", "summary": "Run a dead, failed or canceled job again",
            "parameters": [_path_id()], "responses": manage,
        }},
        "/queues": {"get": {
            "operationId": "listQueues",
            "summary": "The queues with a pause row or a live worker, and whether each is paused",
            "responses": {"200": _json({
                "type": "object", "required": ["queues"],
                "properties": {"queues": {"type": "array", "items": QUEUE}}},
                "The queues"), **_errors(401, 403)},
        }},
        "/queues/{name}/pause": {"post": {
            "operationId": "pauseQueue",
            "summary": "Stop every worker claiming from a queue (within a heartbeat)",
            "parameters": [_queue_name()],
            "responses": {"200": _json(QUEUE_CHANGE, "The queue, paused"),
                          **_errors(400, 401, 403)},
        }},
        "/queues/{name}/resume": {"post": {
            "operationId": "resumeQueue", "summary": "Let workers claim from a queue again",
            "parameters": [_queue_name()],
            "responses": {"200": _json(QUEUE_CHANGE, "The queue, running"),
                          **_errors(400, 401, 403)},
        }},
        "/metrics/jobs": {"get": {
            "operationId": "jobMetrics", "summary": "Counts and timings",
            "parameters": [
                _query("window", schema_of(WINDOW, maxLength=WINDOW_MAX_LENGTH),
                       "Only jobs submitted within this time: seconds, or 15m, 24h, 7d; "
                       "longer than 3650 days counts as 3650 days."),
                _query("format", {"type": "string", "enum": ["json", "prometheus"]},
                       "prometheus: the text exposition format, for scraping."),
            ],
            "responses": {
                "200": {"description": "The figures", "content": {
                    "application/json": {"schema": ref("Metrics")},
                    "text/plain": {"schema": {"type": "string"}},
                }},
                **_errors(400, 401, 403),
            },
        }},
        "/openapi.json": {"get": {
            "operationId": "openapi", "summary": "This document",
            "responses": {"200": {"description": "OpenAPI 3.1",
                                  "content": {"application/json": {"schema": {
                                      "type": "object"}}}}, **_errors(401, 403)},
        }},
    }


def openapi_document(server_url: str = "/api") -> JSONObject:
    from django_jobs.core.version import __version__

    return {
        "openapi": "3.1.0",
        "info": {"title": "django-jobs API", "version": __version__,
                 "description": "Submit, watch, cancel and retry background jobs; pause "
                                "and resume queues."},
        "servers": [{"url": server_url}],
        "security": [{"bearer": []}, {"session": []}],
        "paths": _paths(),
        "components": {
            "schemas": component_schemas(),
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "An API token made in the admin; scopes: "
                                          "submit, read, manage."},
                "session": {"type": "apiKey", "in": "cookie", "name": "sessionid",
                            "description": "A logged-in user with the model permissions; "
                                           "writes need the CSRF token in X-CSRFToken."},
            },
        },
    }
