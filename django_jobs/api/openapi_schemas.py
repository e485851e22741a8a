"""The component schemas of the API's OpenAPI document: a job, its errors and attempts, a
submission (with each registered type's payload rules), a page and the metrics."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django_jobs.api.constraints import (
    CALLBACK_URL_MAX_LENGTH,
    JOB_ID,
    MAX_DELAY_MS,
    QUEUE,
    callback_url_pattern,
    schema_of,
)
from django_jobs.api.submission import RESERVED_PREFIX
from django_jobs.core.validation import (
    MAX_ATTEMPTS_LIMIT,
    PRIORITY_MAX,
    PRIORITY_MIN,
    check_payload,
    typed_arguments,
)
from django_jobs.exceptions import InvalidJob
from django_jobs.handlers.registry import get_handler, registered_types
from django_jobs.models import Job
from django_jobs.models.counts import COUNT_CAP

if TYPE_CHECKING:
    from django_jobs.core.json_rules import JSONObject
    from django_jobs.handlers.handler_arguments import ArgumentSpec

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

def public_types() -> list[str]:
    return [name for name in registered_types() if not name.startswith(RESERVED_PREFIX)]


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _type_schema() -> JSONObject:
    """The registered types a client may submit; any other is refused."""
    types = public_types()
    if not types:
        return {"type": "string", "minLength": 1, "description": "No job type is registered."}
    return {"type": "string", "enum": types, "description": "A registered job type."}


def _payload_rules() -> list[JSONObject]:
    """What a type's own rules ask of the payload: a unique key built from payload fields
    needs the payload to be an object holding them; a typed handler's arguments (the schema
    of ``handlers/handler_arguments.py``), where a payload left out or null stands for ``{}``.
    Empty when no type has such a rule."""
    plain, ruled = [], []
    for name in public_types():
        rule = _payload_rule(name)
        if rule is None:
            plain.append(name)
        else:
            ruled.append(rule)
    if not ruled:
        return []
    return [{"anyOf": [{"properties": {"type": {"enum": plain}}}, *ruled]}] if plain else [
        {"anyOf": ruled}]


def _payload_rule(name: str) -> JSONObject | None:
    """The rule of one type's payload; None for a type with no rule of its own."""
    unique = getattr(get_handler(name), "unique", None)
    fields = list(getattr(unique, "fields", None) or ())
    arguments = typed_arguments(name)
    if not fields and arguments is None:
        return None
    all_of: list[JSONObject] = []
    required = []
    if fields:
        all_of.append({"type": "object", "required": fields})
        required = ["payload"]
    if arguments is not None:
        schema, needed = _arguments_rule(arguments)
        all_of.append(schema)
        if needed:
            required = ["payload"]
    rule: JSONObject = {"properties": {"type": {"const": name}, "payload": {"allOf": all_of}}}
    if required:
        rule["required"] = required
    return rule


def _arguments_rule(arguments: ArgumentSpec) -> tuple[JSONObject, bool]:
    """A typed handler's arguments as the payload's schema, and whether the payload must be
    given: where ``{}`` fits them, a payload left out or null stands for it."""
    schema = arguments.payload_schema()
    try:
        check_payload({}, arguments)
    except InvalidJob:  # {} does not fit: the payload must be given
        return schema, True
    return {"anyOf": [{"type": "null"}, schema]}, False


def _callback_url_schema() -> JSONObject:
    pattern = callback_url_pattern()
    if pattern is None:
        return {"type": "null", "description": "Callbacks are off on this server."}
    return {"type": ["string", "null"], "pattern": f"^{pattern}$",
            "maxLength": CALLBACK_URL_MAX_LENGTH,
            "description": "POSTed the job's JSON, signed, when it ends; on an allowed host."}


def component_schemas() -> JSONObject:
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
        "error": {"anyOf": [ref("JobError"), {"type": "null"}]},
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
        "error": {"anyOf": [ref("JobError"), {"type": "null"}]},
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
        "attempts": {"type": "array", "items": ref("Attempt")}}}]}
    submission = {"type": "object", "required": ["type"], "additionalProperties": False,
                  "properties": {
        "type": _type_schema(),
        "payload": {**ref("StorableJson"),
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
        {"type": "array", "items": ref("StorableJson")},
        {"type": "object", "propertyNames": {"pattern": NO_NUL},
         "additionalProperties": ref("StorableJson")},
    ]}
    created = {"type": "object", "required": ["job_id", "url"],
               "properties": {"job_id": JOB_ID_SCHEMA, "url": {"type": "string"}}}
    page_fields = ["results", "next", "previous", "searched_since"]
    page = {"type": "object", "required": page_fields, "properties": {
        "results": {"type": "array", "items": ref("Job")},
        "next": {"type": ["string", "null"]}, "previous": {"type": ["string", "null"]},
        "searched_since": {**MAYBE_TIME, "description": (
            "Null when the list is complete. Set when a type or queue few jobs have was looked "
            "for among the newest jobs only (PostgreSQL, without since): the creation time of "
            "the oldest of those. Older jobs of that type or queue are not listed; give since "
            "to look further back.")},
    }}
    number = {"type": ["number", "null"]}
    histogram = {"type": "object", "required": ["buckets", "sum", "count"], "properties": {
        "buckets": {"type": "array", "items": {
            "type": "array", "minItems": 2, "maxItems": 2,
            "prefixItems": [{"type": ["number", "string"]}, {"type": "integer", "minimum": 0}]}},
        "sum": {"type": "number"}, "count": {"type": "integer", "minimum": 0}}}
    outcomes = {name: {"type": "integer", "minimum": 0}
                for name in ("completed", "failed", "dead", "canceled")}
    feature_failures = {"type": "integer", "minimum": 0, "description": (
        "job ends a feature's write could not follow (a group's callback, a follow-up, a "
        "completion callback refused: the end stood), from the engine's counts")}
    job_type = {"type": "object",
                "description": "Attempts of one type finished within the window (at most the "
                               "engine's stats retention), by outcome, from the engine's counts",
                "required": ["type", "count", *outcomes, "feature_write_failures", "avg_time",
                             "error_rate", "run_seconds", "wait_seconds"],
                "properties": {"type": {"type": "string"}, "count": {"type": "integer"},
                               **outcomes, "feature_write_failures": feature_failures,
                               "avg_time": number, "error_rate": number,
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
        "job_types": {"type": "array", "items": ref("JobTypeMetrics")},
        "feature_write_failures": feature_failures,
        "horizon": {
            "type": ["object", "null"], "required": ["age_seconds", "xid_age", "holder"],
            "description": "PostgreSQL's xmin horizon: how long (the oldest snapshot or "
                           "prepared transaction) and how many transactions vacuum is held "
                           "back, and what holds it; null on other databases",
            "properties": {"age_seconds": {"type": "number", "minimum": 0},
                           "xid_age": {"type": "integer", "minimum": 0},
                           "holder": {"type": ["string", "null"]}}},
        "read_replica": {
            "type": ["object", "null"],
            "required": ["alias", "read_from", "reason", "lag_seconds"],
            "description": "With READ_REPLICA set: whether these figures were read from the "
                           "replica or, because it failed or fell behind, from the jobs' "
                           "database (reason says which); lag_seconds is the replica's lag as "
                           "last read (PostgreSQL). Null without READ_REPLICA",
            "properties": {"alias": {"type": "string"},
                           "read_from": {"type": "string", "enum": ["replica", "primary"]},
                           "reason": {"type": ["string", "null"]},
                           "lag_seconds": {"type": ["number", "null"], "minimum": 0}}},
    }
    metrics = {"type": "object", "required": list(metrics_properties),
               "properties": metrics_properties}
    return {"Error": error, "JobError": job_error, "Attempt": attempt, "Job": job,
            "JobDetail": detail, "JobSubmission": submission, "Created": created,
            "JobPage": page, "JobTypeMetrics": job_type, "Metrics": metrics,
            "StorableJson": storable}
