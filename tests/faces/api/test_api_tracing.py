"""``POST /jobs`` joins the caller's trace from its W3C ``traceparent``/``tracestate`` headers."""

import json

import pytest
from opentelemetry import trace

from django_jobs.models import Job
from tests.api_support import submit
from tests.tracing_support import finished, in_memory

pytestmark = pytest.mark.django_db
TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"


def test_the_enqueue_span_is_a_child_of_the_callers_span(api):
    memory = in_memory()
    response = api.post("/api/jobs", {"type": "noop"}, headers={
        "traceparent": f"00-{TRACE}-{PARENT}-01", "tracestate": "congo=t61rcWkgMzE"})
    assert response.status_code == 201
    [send] = finished(memory)
    assert send.trace_id == "0x" + TRACE and send.parent_id == "0x" + PARENT
    job = Job.objects.get(public_id=response.json()["job_id"])
    assert json.loads(job.trace_context) == {
        "traceparent": f"00-{TRACE}-{send.span_id[2:]}-01", "tracestate": "congo=t61rcWkgMzE"}


@pytest.mark.parametrize("headers", [
    {}, {"traceparent": "nonsense"}, {"traceparent": f"00-{'0' * 32}-{PARENT}-01"},
    {"tracestate": "congo=t61rcWkgMzE"},
])
def test_without_a_valid_traceparent_nothing_is_stored(api, headers):
    memory = in_memory()
    response = api.post("/api/jobs", {"type": "noop"}, headers=headers)
    assert response.status_code == 201
    assert Job.objects.get(public_id=response.json()["job_id"]).trace_context is None
    assert finished(memory) == []


def test_an_active_span_wins_over_the_headers(api):
    """A site whose Django is instrumented has its request span active, itself the headers'
    child: the enqueue is that span's child."""
    memory = in_memory()
    with trace.get_tracer("test").start_as_current_span("request") as request_span:
        job_id = submit(api, type="noop")
        ids = request_span.get_span_context()
        _ = api.post("/api/jobs", {"type": "noop"},
                     headers={"traceparent": f"00-{TRACE}-{PARENT}-01"})
    sends = [s for s in finished(memory) if s.name == "send default"]
    assert len(sends) == 2
    assert {s.parent_id for s in sends} == {f"0x{ids.span_id:016x}"}
    assert Job.objects.get(public_id=job_id).trace_context is not None
