"""The OpenAPI 3.1 document: served, true to the URLs, and true to the real responses, checked
by hand for every documented status and by a schemathesis (Hypothesis) run on the live routes."""

import os
import re

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from django_jobs.api import urls
from django_jobs.api.openapi import openapi_document
from django_jobs.models import Job
from tests.api_support import ALL_SCOPES, Api, make_token, run_ready

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLE_JOB_ID = "j-4f1c2a9b8e7d6c5b4a39"  # the job_id example in the document
FUZZ_EXAMPLES = int(os.environ.get("DJANGO_JOBS_FUZZ_EXAMPLES", "25"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_headers_conformance, response_schema_conformance]


@pytest.fixture
def document():
    return openapi_document("/api")


@pytest.fixture
def schema(document):
    return schemathesis.openapi.from_dict(document)


def test_the_document_is_served_as_openapi_3_1():
    response = Api(make_token("read")).get("/api/openapi.json")
    assert response.status_code == 200
    document = response.json()
    assert document["openapi"] == "3.1.0"
    assert document["servers"] == [{"url": "http://testserver/api"}]


def test_the_document_has_exactly_the_routes_of_the_urlconf(document):
    routes = {"/" + re.sub(r"<\w+:(\w+)>", r"{\1}", str(p.pattern)) for p in urls.urlpatterns
              if p.name != "not-found"}
    assert set(document["paths"]) == routes


def test_schemathesis_loads_every_operation(schema):
    results = list(schema.get_all_operations())
    assert len(results) == 7
    for result in results:
        result.ok()  # raises on an operation the loader cannot understand


def documented(document) -> set[tuple[str, str, int]]:
    return {
        (method.upper(), path, int(status))
        for path, item in document["paths"].items()
        for method, operation in item.items()
        for status in operation["responses"]
    }


def test_every_documented_response_is_produced_and_matches_the_document(
    live_server, document, schema
):
    """Drive every route to every status it documents; validate each real response."""
    full = requests.Session()
    full.headers["Authorization"] = f"Bearer {make_token(*ALL_SCOPES)}"
    none = requests.Session()
    weak = requests.Session()
    weak.headers["Authorization"] = f"Bearer {make_token()}"
    done = Job.enqueue("echo", {"a": 1})
    dead = Job.enqueue("permanent")
    run_ready()
    waiting = Job.enqueue("noop", priority=7)
    running = Job.enqueue("noop", queue="busy")
    Job.objects.claim(worker_id="w", limit=1, lease_seconds=30, queues=["busy"])
    base = live_server.url + "/api"
    seen: set[tuple[str, str, int]] = set()

    def hit(session, method, template, path=None, **kwargs):
        response = session.request(method, base + (path or template), **kwargs)
        operation = schema[template][method]
        assert str(response.status_code) in document["paths"][template][method.lower()][
            "responses"], (method, template, response.status_code, response.text)
        operation.validate_response(response)
        seen.add((method, template, response.status_code))
        return response

    body = {"type": "echo", "payload": {"k": "v"}, "priority": "high", "delay": 0}
    for session, expected in ((none, 401), (weak, 403)):
        hit(session, "POST", "/jobs", json=body)
        hit(session, "GET", "/jobs")
        hit(session, "GET", "/jobs/{job_id}", f"/jobs/{done.public_id}")
        hit(session, "POST", "/jobs/{job_id}/cancel", f"/jobs/{waiting.public_id}/cancel")
        hit(session, "POST", "/jobs/{job_id}/retry", f"/jobs/{dead.public_id}/retry")
        hit(session, "GET", "/metrics/jobs")
        assert hit(session, "GET", "/openapi.json").status_code == expected
    key = {"Idempotency-Key": "one"}
    assert hit(full, "POST", "/jobs", json=body, headers=key).status_code == 201
    assert hit(full, "POST", "/jobs", json=body, headers=key).status_code == 200
    assert hit(full, "POST", "/jobs", json={**body, "delay": 5}, headers=key).status_code == 409
    assert hit(full, "POST", "/jobs", json={"type": "nope"}).status_code == 400
    assert hit(full, "POST", "/jobs", data="type=echo",
               headers={"Content-Type": "text/plain"}).status_code == 415
    hit(full, "GET", "/jobs", params={"limit": 2})
    hit(full, "GET", "/jobs", params={"status": "completed,dead", "since": "2020-01-01T00:00:00Z"})
    assert hit(full, "GET", "/jobs", params={"limit": "x"}).status_code == 400
    assert hit(full, "GET", "/jobs/{job_id}", f"/jobs/{dead.public_id}").json()["error"]
    assert hit(full, "GET", "/jobs/{job_id}", "/jobs/j-nope").status_code == 404
    assert hit(full, "POST", "/jobs/{job_id}/cancel", f"/jobs/{waiting.public_id}/cancel"
               ).status_code == 200
    assert hit(full, "POST", "/jobs/{job_id}/cancel", f"/jobs/{running.public_id}/cancel"
               ).status_code == 202
    assert hit(full, "POST", "/jobs/{job_id}/cancel", f"/jobs/{done.public_id}/cancel"
               ).status_code == 409
    assert hit(full, "POST", "/jobs/{job_id}/cancel", "/jobs/j-nope/cancel").status_code == 404
    assert hit(full, "POST", "/jobs/{job_id}/retry", f"/jobs/{dead.public_id}/retry"
               ).status_code == 200
    assert hit(full, "POST", "/jobs/{job_id}/retry", f"/jobs/{done.public_id}/retry"
               ).status_code == 409
    assert hit(full, "POST", "/jobs/{job_id}/retry", "/jobs/j-nope/retry").status_code == 404
    hit(full, "GET", "/metrics/jobs")
    prometheus = hit(full, "GET", "/metrics/jobs", params={"format": "prometheus"})
    assert prometheus.headers["Content-Type"].startswith("text/plain")
    assert hit(full, "GET", "/metrics/jobs", params={"window": "1y"}).status_code == 400
    hit(full, "GET", "/openapi.json")
    assert seen == documented(document)


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
def fuzz(operation, base_url: str, token: str) -> None:
    @given(case=operation.as_strategy())
    @settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case):
        case.call_and_validate(base_url=base_url, headers={"Authorization": f"Bearer {token}"},
                               checks=CHECKS)

    run()


def test_generated_requests_get_no_500_and_no_response_outside_the_document(live_server, schema):
    """Schemathesis draws requests from the document (including its examples, one of which
    names a real job) and checks each answer: no 5xx, documented status, content type,
    headers and body."""
    token = make_token(*ALL_SCOPES)
    Job.objects.filter(pk=Job.enqueue("echo").pk).update(public_id=EXAMPLE_JOB_ID)
    for result in schema.get_all_operations():
        fuzz(result.ok(), live_server.url + "/api", token)
