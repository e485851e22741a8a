"""The OpenAPI 3.1 document of the API, built per request so it lists the registered types."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django_jobs.api.constraints import (
    CALLBACK_URL_MAX_LENGTH,
    CURSOR,
    IDEMPOTENCY_KEY,
    JOB_ID,
    MAX_DELAY_MS,
    QUEUE,
    STATUS_LIST,
    WINDOW,
    WINDOW_MAX_LENGTH,
    callback_url_pattern,
    schema_of,
)
from django_jobs.api.submission import RESERVED_PREFIX
from django_jobs.core.registry import get_handler, registered_types
from django_jobs.core.settings import jobs_settings
from django_jobs.core.validation import (
    MAX_ATTEMPTS_LIMIT,
    PRIORITY_MAX,
    PRIORITY_MIN,
    check_payload,
    typed_arguments,
)
from django_jobs.exceptions import InvalidJob
from django_jobs.models import Job
from django_jobs.models.counts import COUNT_CAP

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject

STATUS = {"type": "string", "enum": list(Job.Status.values)}
NO_NUL = "^[^\\u0000]*$"  # PostgreSQL text cannot hold a NUL: the API refuses it everywhere
TIME = {"type": "string", "format": "date-time"}
MAYBE_TIME = {"type": ["string", "null"], "format": "date-time"}
PRIORITY = {
    "anyOf": [
        {"type": "string", "enum": ["low", "normal", "high"]},
        {"type": "integer", "minimum": PRIORITY_MIN, "maximum": PRIORITY_MAX},
    ]
}
JOB_ID_SCHEMA = schema_of(JOB_ID, examples=["j-4f1c2a9b8e7d6c5b4a39"])
CHALLENGE = {"WWW-Authenticate": {"schema": {"type": "string"},
                                  "description": 'Bearer realm="django-jobs"'}}


def _public_types() -> list[str]:
    return [name for name in registered_types() if not name.startswith(RESERVED_PREFIX)]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: JSONObject, description: str) -> JSONObject:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> JSONObject:
    words = {400: "Bad input; `errors` names each field", 401: "No or wrong credentials",
             403: "Not allowed (scope, permission or CSRF)", 404: "No such job",
             409: "Conflict with the job's state or an Idempotency-Key",
             415: "The body is not application/json"}
    answers = {str(code): _json(_ref("Error"), words[code]) for code in codes}
    if 401 in codes:
        answers["401"]["headers"] = CHALLENGE
    return answers


def _type_schema() -> JSONObject:
    """The registered types a client may submit; any other is refused."""
    types = _public_types()
    if not types:
        return {"type": "string", "minLength": 1, "description": "No job type is registered."}
    return {"type": "string", "enum": types, "description": "A registered job type."}


def _payload_rules() -> list[JSONObject]:
    """What a type's own rules ask of the payload: a unique key built from payload fields
    needs the payload to be an object holding them; a typed handler's arguments (the schema
    of ``core/handler_arguments.py``), where a payload left out or null stands for ``{}``.
    Empty when no type has such a rule."""
    plain, ruled = [], []
    for name in _public_types():
        unique = getattr(get_handler(name), "unique", None)
        fields = list(getattr(unique, "fields", None) or ())
        arguments = typed_arguments(name)
        if not fields and arguments is None:
            plain.append(name)
            continue
        payload: JSONObject = {"allOf": []}
        required = []
        if fields:
            payload["allOf"].append({"type": "object", "required": fields})
            required = ["payload"]
        if arguments is not None:
            schema = arguments.payload_schema()
            try:
                check_payload({}, arguments)
            except InvalidJob:  # {} does not fit: the payload must be given
                required = ["payload"]
                payload["allOf"].append(schema)
            else:
                payload["allOf"].append({"anyOf": [{"type": "null"}, schema]})
        rule: JSONObject = {"properties": {"type": {"const": name}, "payload": payload}}
        if required:
            rule["required"] = required
        ruled.append(rule)
    if not ruled:
        return []
    return [{"anyOf": [{"properties": {"type": {"enum": plain}}}, *ruled]}] if plain else [
        {"anyOf": ruled}]


def _callback_url_schema() -> JSONObject:
    pattern = callback_url_pattern()
    if pattern is None:
        return {"type": "null", "description": "Callbacks are off on this server."}
    return {"type": ["string", "null"], "pattern": f"^{pattern}$",
            "maxLength": CALLBACK_URL_MAX_LENGTH,
            "description": "POSTed the job's JSON, signed, when it ends; on an allowed host."}


def _schemas() -> JSONObject:
    error = {"type": "object", "required": ["detail", "errors"], "properties": {
        "detail": {"type": "string"},
        "errors": {"type": "object", "additionalProperties": {"type": "string"}},
    }}
    attempt = {"type": "object", "required": [
        "number", "outcome", "worker_id", "started_at", "finished_at", "duration_ms", "error",
    ], "properties": {
        "number": {"type": "integer", "minimum": 0},
        "outcome": {"type": "string"},
        "worker_id": {"type": "string"},
        "started_at": TIME, "finished_at": MAYBE_TIME,
        "duration_ms": {"type": ["number", "null"]},
        "error": {"anyOf": [_ref("JobError"), {"type": "null"}]},
        "cpu_time": {"type": ["number", "null"]},
        "peak_memory": {"type": ["integer", "null"]},
    }}
    job_error = {"type": "object", "required": ["type", "message"], "properties": {
        "type": {"type": "string"}, "message": {"type": "string"},
        "traceback": {"type": "string"}, "details": {},
    }}
    job_properties = {
        "job_id": JOB_ID_SCHEMA, "url": {"type": ["string", "null"]},
        "type": {"type": "string"}, "status": STATUS, "priority": PRIORITY,
        "queue": {"type": "string"}, "attempt": {"type": "integer", "minimum": 0},
        "max_attempts": {"type": "integer", "minimum": 1},
        "crashes": {"type": "integer", "minimum": 0}, "payload": {}, "result": {},
        "error": {"anyOf": [_ref("JobError"), {"type": "null"}]},
        "cancel_requested": {"type": "boolean"},
        "progress": {"anyOf": [{"type": "null"}, {"type": "object", "properties": {
            "fraction": {"type": ["number", "null"], "minimum": 0, "maximum": 1},
            "message": {"type": "string"}}}]},
        "callback_url": {"type": ["string", "null"]},
        "on_dependency_failure": {
            "type": "string", "enum": ["wait", "cancel", "run"],
            "description": "What the job does if a job it depends on goes dead or is "
                           "canceled: keep waiting, be canceled, or run anyway."},
        "run_at": TIME, "created_at": TIME, "updated_at": TIME,
        "started_at": MAYBE_TIME, "finished_at": MAYBE_TIME,
    }
    job = {"type": "object", "required": list(job_properties), "properties": job_properties}
    detail = {"allOf": [job, {"type": "object", "required": ["attempts"], "properties": {
        "attempts": {"type": "array", "items": _ref("Attempt")}}}]}
    submission = {"type": "object", "required": ["type"], "additionalProperties": False,
                  "properties": {
        "type": _type_schema(),
        "payload": {**_ref("StorableJson"),
                    "description": "Any JSON value; an object by convention. No NUL and no lone "
                                   "surrogate in any string, nested at most 31 levels."},
        "priority": {"anyOf": [*PRIORITY["anyOf"], {"type": "null"}]},
        "delay": {"type": ["integer", "null"], "minimum": 0, "maximum": MAX_DELAY_MS,
                  "description": "Milliseconds to wait before the job may run."},
        "queue": {"type": ["string", "null"], "pattern": f"^{QUEUE}$"},
        "max_attempts": {"type": ["integer", "null"], "minimum": 1,
                         "maximum": MAX_ATTEMPTS_LIMIT},
        "callback_url": _callback_url_schema(),
    }}
    rules = _payload_rules()
    if rules:
        submission = {"allOf": [submission, *rules]}
    storable = {"anyOf": [
        {"type": ["null", "boolean", "number"]},
        {"type": "string", "pattern": NO_NUL},
        {"type": "array", "items": _ref("StorableJson")},
        {"type": "object", "propertyNames": {"pattern": NO_NUL},
         "additionalProperties": _ref("StorableJson")},
    ]}
    created = {"type": "object", "required": ["job_id", "url"],
               "properties": {"job_id": JOB_ID_SCHEMA, "url": {"type": "string"}}}
    page = {"type": "object", "required": ["results", "next", "previous"], "properties": {
        "results": {"type": "array", "items": _ref("Job")},
        "next": {"type": ["string", "null"]}, "previous": {"type": ["string", "null"]},
        "searched_since": {**TIME, "description": (
            "Present when a type or queue few jobs have was looked for among the newest jobs "
            "only (PostgreSQL): the creation time of the oldest of those. Older jobs of that "
            "type or queue are not listed.")},
    }}
    number = {"type": ["number", "null"]}
    histogram = {"type": "object", "required": ["buckets", "sum", "count"], "properties": {
        "buckets": {"type": "array", "items": {
            "type": "array", "minItems": 2, "maxItems": 2,
            "prefixItems": [{"type": ["number", "string"]}, {"type": "integer", "minimum": 0}]}},
        "sum": {"type": "number"}, "count": {"type": "integer", "minimum": 0}}}
    outcomes = {name: {"type": "integer", "minimum": 0}
                for name in ("completed", "failed", "dead", "canceled")}
    job_type = {"type": "object",
                "description": "Attempts of one type finished within the window (at most the "
                               "engine's stats retention), by outcome, from the engine's counts",
                "required": ["type", "count", *outcomes, "avg_time", "error_rate",
                             "run_seconds", "wait_seconds"],
                "properties": {"type": {"type": "string"}, "count": {"type": "integer"},
                               **outcomes, "avg_time": number, "error_rate": number,
                               "run_seconds": histogram, "wait_seconds": histogram}}
    counts = {name: {"type": "integer", "minimum": 0} for name in ["total_jobs", *STATUS["enum"]]}
    metrics_properties = {
        **counts,
        "estimated": {
            "type": "array", "items": {"type": "string", "enum": ["total_jobs", *STATUS["enum"]]},
            "description": "The counts that are the planner's estimate, not exact: a status "
                           f"with more than {COUNT_CAP} jobs is counted that far and then "
                           "estimated (SQLite always counts exactly)"},
        "avg_processing_time_ms": number, "avg_time_to_complete_ms": number,
        "oldest_ready_age_seconds": number, "window_seconds": number, "generated_at": TIME,
        "job_types": {"type": "array", "items": _ref("JobTypeMetrics")},
        "horizon": {
            "type": ["object", "null"], "required": ["age_seconds", "xid_age", "holder"],
            "description": "PostgreSQL's xmin horizon: how long (the oldest snapshot or "
                           "prepared transaction) and how many transactions vacuum is held "
                           "back, and what holds it; null on other databases",
            "properties": {"age_seconds": {"type": "number", "minimum": 0},
                           "xid_age": {"type": "integer", "minimum": 0},
                           "holder": {"type": ["string", "null"]}}},
    }
    metrics = {"type": "object", "required": list(metrics_properties),
               "properties": metrics_properties}
    return {"Error": error, "JobError": job_error, "Attempt": attempt, "Job": job,
            "JobDetail": detail, "JobSubmission": submission, "Created": created,
            "JobPage": page, "JobTypeMetrics": job_type, "Metrics": metrics,
            "StorableJson": storable}


def _path_id() -> JSONObject:
    return {"name": "job_id", "in": "path", "required": True, "schema": JOB_ID_SCHEMA,
            "description": "A job's id; any other string is a 404."}


def _query(name: str, schema: JSONObject, description: str) -> JSONObject:
    return {"name": name, "in": "query", "required": False, "schema": schema,
            "description": description}


def _paths() -> JSONObject:
    most = int(jobs_settings.API_MAX_PAGE_SIZE)
    location = {"Location": {"schema": {"type": "string"}, "description": "The job's URL."}}
    links = {name.capitalize(): {"operationId": f"{name}Job",
                                 "parameters": {"job_id": "$response.body#/job_id"}}
             for name in ("get", "cancel", "retry")}
    manage = {"200": _json(_ref("JobDetail"), "The job after the change"),
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
                    "application/json": {"schema": _ref("JobSubmission")}}},
                "responses": {
                    "201": {**_json(_ref("Created"), "Created"), "headers": location,
                            "links": links},
                    "200": {**_json(_ref("Created"), "The job this Idempotency-Key created"),
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
                           "Only jobs of this type."),
                    _query("queue", {"type": "string", "pattern": NO_NUL},
                           "Only jobs in this queue."),
                    _query("since", TIME, "Only jobs updated at or after this time."),
                    _query("limit", {"type": "integer", "minimum": 1, "maximum": most},
                           "Page size."),
                    _query("cursor", schema_of(CURSOR),
                           "From a previous page's next/previous."),
                ],
                "responses": {"200": _json(_ref("JobPage"), "A page of jobs"),
                              **_errors(400, 401, 403)},
            },
        },
        "/jobs/{job_id}": {"get": {
            "operationId": "getJob", "summary": "One job with its attempts",
            "parameters": [_path_id()],
            "responses": {"200": _json(_ref("JobDetail"), "The job"), **_errors(401, 403, 404)},
        }},
        "/jobs/{job_id}/cancel": {"post": {
            "operationId": "cancelJob", "summary": "Cancel a waiting job, or stop a running one",
            "parameters": [_path_id()],
            "responses": {**manage, "202": _json(_ref("JobDetail"), "Asked the worker to stop")},
        }},
        "/jobs/{job_id}/retry": {"post": {
            "operationId": "retryJob", "summary": "Run a dead, failed or canceled job again",
            "parameters": [_path_id()], "responses": manage,
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
                    "application/json": {"schema": _ref("Metrics")},
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
                 "description": "Submit, watch, cancel and retry background jobs."},
        "servers": [{"url": server_url}],
        "security": [{"bearer": []}, {"session": []}],
        "paths": _paths(),
        "components": {
            "schemas": _schemas(),
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
