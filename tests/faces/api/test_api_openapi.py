"""The OpenAPI 3.1 document: served, true to the URLs, and true to the real responses, checked
by hand for every documented status and by a schemathesis (Hypothesis) run on the live routes."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import requests
import schemathesis

from django_jobs.api import urls
from django_jobs.api.openapi import openapi_document
from django_jobs.models import Job
from tests.api_support import ALL_SCOPES, Api, make_token, run_ready

pytestmark = pytest.mark.django_db(transaction=True)

EXAMPLE_JOB_ID = "j-4f1c2a9b8e7d6c5b4a39"  # the job_id example in the document
# Examples per operation in the fuzzing and stateful phases (the coverage phase derives its cases
# from the document, whatever this is): a CI-sized run by default; SCHEMATHESIS_EXAMPLES=1000
# for the full run by hand (scripts/test passes it on, and 10 on Django 6).
EXAMPLES = int(os.environ.get("SCHEMATHESIS_EXAMPLES", "50"))
SEED = os.environ.get("SCHEMATHESIS_SEED", "1")  # fixed, so CI is repeatable; vary it by hand


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


def run_schemathesis(
    base_url: str, workdir: Path, *options: str, examples: int = EXAMPLES
) -> tuple[int, str]:
    """``schemathesis run`` (its CLI, every phase, every check, valid and invalid data) against
    the live server, reading the document from a file so that a run without credentials can
    load it too. Returns the exit status and the report."""
    document = workdir / "openapi.json"
    document.write_text(json.dumps(openapi_document(base_url)))
    command = [
        sys.executable, "-m", "schemathesis.cli", "run", str(document), "--url", base_url,
        "--checks", "all", "--mode", "all", "--max-examples", str(examples),
        "--seed", SEED, "--workers", "1", "--suppress-health-check", "all", *options,
    ]
    done = subprocess.run(
        command, cwd=workdir, capture_output=True, text=True, timeout=120 + 10 * examples,
        env={**os.environ, "NO_COLOR": "1"},
    )
    return done.returncode, done.stdout + done.stderr


def test_schemathesis_finds_no_failure_with_a_token_that_has_every_scope(live_server, tmp_path):
    """Requests drawn from the document, and requests that break it (negative data), with
    every check: no 5xx; valid input accepted, invalid input refused with a 4xx; statuses,
    content types, headers and bodies as documented; links from a submission to its job
    followed (stateful phase). One example names a real job."""
    token = make_token(*ALL_SCOPES)
    Job.objects.filter(pk=Job.enqueue("echo").pk).update(public_id=EXAMPLE_JOB_ID)
    status, report = run_schemathesis(live_server.url + "/api", tmp_path,
                                      "--header", f"Authorization: Bearer {token}")
    assert status == 0, report[-6000:]
    assert "No issues found" in report, report[-6000:]


def test_schemathesis_without_credentials_gets_only_json_401s(live_server, tmp_path):
    """The same run with no credentials: every operation answers a documented JSON 401
    (schemathesis's checks: no 5xx, status, content type, body and headers as documented),
    and schemathesis reports that all seven answered nothing but 401/403."""
    status, report = run_schemathesis(live_server.url + "/api", tmp_path,
                                      "--phases", "examples,coverage,fuzzing",
                                      examples=max(EXAMPLES // 2, 1))
    assert status == 0, report[-6000:]
    assert "Authentication failed: 7 operations returned only 401/403" in report, report[-6000:]
    assert Job.objects.count() == 0


@pytest.mark.parametrize(("user", "status"), [
    ({"is_staff": True}, 200),                        # staff, without view_job
    ({"is_staff": False, "perm": "view_job"}, 200),   # the route's permission
    ({"is_staff": False}, 403),                       # neither
    (None, 401),                                      # anonymous
])
def test_the_document_is_served_to_a_staff_session_too(user, status):
    from django.contrib.auth.models import Permission, User
    from django.test import Client

    client = Client()
    if user is not None:
        person = User.objects.create_user("reader", password="x", is_staff=user["is_staff"])
        if "perm" in user:
            person.user_permissions.add(Permission.objects.get(codename=user["perm"]))
        client.force_login(person)
    response = client.get("/api/openapi.json")
    assert response.status_code == status, response.content
    if status == 200:
        assert response.json()["openapi"] == "3.1.0"
    else:
        assert "detail" in response.json()
    # The routes with jobs in them stay as they were: staff alone does not read jobs.
    if user == {"is_staff": True}:
        assert client.get("/api/jobs").status_code == 403
