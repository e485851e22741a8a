"""OpenTelemetry tracing across a real ``runworker``: the caller's span, the API's enqueue span
and each attempt's span, joined as docs/howto-tracing.md says.

This process records its spans with the SDK's in-memory exporter; the worker subprocess runs
``tests/settings_tracing.py``, whose tracer provider writes every span to a file read back here.
"""

import json
import signal
from collections import Counter
from datetime import timedelta

import pytest
from django.db import connection, transaction
from opentelemetry import trace

from django_jobs import enqueue_group
from django_jobs.models import Job, JobGroup, Worker
from tests.api_support import Api, make_token
from tests.conftest import wait_for
from tests.tracing_support import finished, in_memory, read_spans

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
FAST = ["--lease", "5", "--heartbeat", "0.3", "--poll-interval", "0.1"]


def hex_id(value: int, width: int) -> str:
    return f"0x{value:0{width}x}"


def test_request_enqueue_and_attempts_are_joined_across_a_real_worker(start_worker, tmp_path):
    memory = in_memory()
    api = Api(make_token("submit", "read"))
    tracer = trace.get_tracer("the caller")
    with tracer.start_as_current_span("caller", kind=trace.SpanKind.CLIENT) as caller:
        # The caller's span travels in the request's headers, as an instrumented client sends it
        ids = caller.get_span_context()
        headers = {"traceparent": f"00-{ids.trace_id:032x}-{ids.span_id:016x}-01",
                   "tracestate": "vendor=opaque"}
    response = api.post("/api/jobs", {"type": "traced_retry", "queue": "traced"},
                        headers=headers)
    assert response.status_code == 201, response.content
    job = Job.objects.get(public_id=response.json()["job_id"])

    [caller_span, send] = finished(memory)
    assert send.name == "send traced" and send.kind == "SpanKind.PRODUCER"
    assert send.trace_id == caller_span.trace_id and send.parent_id == caller_span.span_id
    assert send.attributes == {
        "messaging.system": "django_jobs", "messaging.operation.type": "send",
        "messaging.operation.name": "send", "messaging.destination.name": "traced",
        "django_jobs.job.type": "traced_retry", "messaging.message.id": job.public_id,
    }
    stored = json.loads(job.trace_context)
    assert stored == {"traceparent": f"00-{send.trace_id[2:]}-{send.span_id[2:]}-01",
                      "tracestate": "vendor=opaque"}

    spans_file = tmp_path / "spans.jsonl"
    worker = start_worker(*FAST, "--queues", "traced", "--settings=tests.settings_tracing",
                          env={"JOBS_TRACE_FILE": str(spans_file)})
    wait_for(lambda: Job.objects.filter(type="noop", queue="traced", status="completed")
             .count() == 2, timeout=60)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    spans = read_spans(spans_file)
    job.refresh_from_db()
    assert job.status == "completed" and job.attempt == 2

    processes = {(s.attributes["messaging.message.id"], s.attributes["django_jobs.job.attempt"]): s
                 for s in spans if s.name == "process traced"}
    first, second = processes[job.public_id, 1], processes[job.public_id, 2]
    # The first attempt is a child of the enqueue, in the caller's trace
    assert first.kind == "SpanKind.CONSUMER"
    assert first.trace_id == send.trace_id and first.parent_id == send.span_id
    assert first.links == []
    assert first.status == "ERROR" and first.events == ["exception"]
    assert first.attributes["django_jobs.job.outcome"] == "failed"
    assert first.attributes["error.type"] == "tests.trace_jobs.FirstAttemptFails"
    assert first.attributes["messaging.destination.name"] == "traced"
    assert first.attributes["messaging.system"] == "django_jobs"
    assert first.attributes["messaging.operation.type"] == "process"
    assert first.attributes["django_jobs.job.type"] == "traced_retry"
    # The retry is a trace of its own, linked to the enqueue
    assert second.trace_id != send.trace_id and second.parent_id is None
    assert second.links == [(send.trace_id, send.span_id)]
    assert second.status == "UNSET" and second.events == []
    assert second.attributes["django_jobs.job.outcome"] == "completed"

    # What the retry enqueued, at once and as a follow-up, continues the retry's trace
    sends = [s for s in spans if s.kind == "SpanKind.PRODUCER"]
    assert len(sends) == 2
    for child_send in sends:
        assert child_send.trace_id == second.trace_id and child_send.parent_id == second.span_id
    children = Job.objects.filter(type="noop", queue="traced")
    assert {c.payload["from"] for c in children} == {"handler", "follow-up"}
    for child in children:
        run = processes[child.public_id, 1]
        assert run.trace_id == second.trace_id
        assert run.parent_id in {s.span_id for s in sends}
        assert json.loads(child.trace_context)["traceparent"].split("-")[2] == run.parent_id[2:]
    assert len(processes) == 4  # two attempts and two children, nothing else


def test_a_worker_without_a_tracer_provider_still_hands_the_enqueue_context_on(start_worker):
    """No SDK in the worker: no spans, but what an attempt enqueues carries the context stored
    with its job (the enqueue's), so the trace goes on where the next job is run."""
    memory = in_memory()
    with trace.get_tracer("the caller").start_as_current_span("caller"):
        job = Job.enqueue("traced_parent", queue="traced")
    [send, _caller] = finished(memory)
    worker = start_worker(*FAST, "--queues", "traced")
    wait_for(lambda: Job.objects.filter(type="noop", status="completed").exists(), timeout=60)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    child = Job.objects.get(type="noop")
    assert child.payload == {"from": "parent"}
    assert json.loads(child.trace_context)["traceparent"].split("-")[2] == send.span_id[2:]
    assert child.trace_context == Job.objects.get(pk=job.pk).trace_context


def test_an_exporter_that_blocks_holds_no_job_no_finish_and_no_lease(start_worker, tmp_path):
    """The worker's span processor exports in ``span.end()`` (``SimpleSpanProcessor``) to an
    exporter that waits while a file exists: the jobs, their follow-ups and a group's callback
    all complete, the finishes commit (their rows and the group's row can be locked), the
    heartbeat goes on past a lease; once the exporter is let go, every span is exported, once,
    with its parent."""
    memory = in_memory()
    with trace.get_tracer("the caller").start_as_current_span("caller"):
        jobs = [Job.enqueue("traced_follows_up", {"n": n}, queue="traced") for n in range(10)]
        group = enqueue_group("exported late", [("noop", {"n": n}, {"queue": "traced"})
                                                for n in range(3)],
                              callback="noop", callback_options={"queue": "traced"})
    sends = {s.attributes["messaging.message.id"]: s for s in finished(memory)
             if s.name == "send traced" and "messaging.message.id" in s.attributes}
    gate = tmp_path / "gate"
    gate.touch()
    spans_file = tmp_path / "spans.jsonl"
    worker = start_worker(*FAST, "--queues", "traced", "--settings=tests.settings_tracing",
                          env={"JOBS_TRACE_FILE": str(spans_file), "JOBS_TRACE_GATE": str(gate)})

    # (a) Every job completes while the exporter is held, and the worker's heartbeat goes on
    # past the lease's length (5 s): no job's lease lapses
    expected = 10 + 10 + 3 + 1  # the jobs, their follow-ups, the group's jobs, its callback
    wait_for(lambda: Job.objects.filter(queue="traced", status="completed").count() == expected,
             timeout=60)
    wait_for(lambda: Worker.objects.filter(
        last_heartbeat__gt=timedelta(seconds=6) + Worker.objects.get().started_at).exists(),
        timeout=60)
    assert (tmp_path / "gate.waited").exists()  # the exporter is held ...
    assert read_spans(spans_file) == []  # ... and has exported nothing
    assert worker.proc.poll() is None
    assert set(Job.objects.filter(queue="traced").values_list("attempt", flat=True)) == {1}
    # (b) No finish's transaction is held open: another connection locks and updates the rows
    finished_jobs = Job.objects.filter(queue="traced")
    with transaction.atomic():
        if connection.features.has_select_for_update_nowait:
            assert len(finished_jobs.select_for_update(nowait=True)) == expected
            JobGroup.objects.select_for_update(nowait=True).get(pk=group.pk)
        assert finished_jobs.update(queue="traced") == expected
        assert JobGroup.objects.filter(pk=group.pk).update(name="exported late") == 1
    group.refresh_from_db()
    assert group.completed == 3 and group.callback_job_id is not None

    # (c) Let go, the exporter exports every span, each attempt's once, with its parent
    gate.unlink()
    wait_for(lambda: sum(s.name == "process traced" for s in read_spans(spans_file))
             == expected, timeout=60)
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
    assert "dropped" not in worker.output()
    spans = read_spans(spans_file)
    processes = [s for s in spans if s.name == "process traced"]
    runs = Counter((s.attributes["messaging.message.id"], s.attributes["django_jobs.job.attempt"])
                   for s in processes)
    assert runs == {(job.public_id, 1): 1 for job in finished_jobs}  # none run twice
    process = {s.attributes["messaging.message.id"]: s for s in processes}
    worker_sends = [s for s in spans if s.kind == "SpanKind.PRODUCER"]
    for job in jobs:
        run = process[job.public_id]
        assert (run.trace_id, run.parent_id) == (sends[job.public_id].trace_id,
                                                 sends[job.public_id].span_id)
        [follow_up_send] = [s for s in worker_sends if s.parent_id == run.span_id]
        assert follow_up_send.trace_id == run.trace_id
        follow_up = Job.objects.get(public_id=follow_up_send.attributes["messaging.message.id"])
        assert follow_up.payload == {"from": "follow-up"}
        follow_up_run = process[follow_up.public_id]
        assert (follow_up_run.trace_id, follow_up_run.parent_id) == (
            follow_up_send.trace_id, follow_up_send.span_id)
    assert len(worker_sends) == 10
