"""The trace context an enqueue stores (``Job.trace_context``) on every insert path: the
single INSERT, the one-statement batch (PostgreSQL's and MariaDB's own SQL, the ORM elsewhere),
unique and dependent inserts; and what the finish enqueues (follow-ups, callbacks) in the trace
of the attempt that asked for it. Spans are recorded with the SDK's in-memory exporter.
"""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings
from django.db.models.signals import pre_save
from opentelemetry import trace

from django_jobs.exceptions import InvalidJob
from django_jobs.features.callbacks import CALLBACK_TYPE
from django_jobs.models import Job
from tests.conftest import ROOT, settings_module
from tests.helpers import run_burst
from tests.tracing_support import finished, in_memory

pytestmark = pytest.mark.django_db(transaction=True)


def span_id_of(job: Job) -> str:
    """The span id the job's stored traceparent names, as the SDK's JSON writes it."""
    return "0x" + json.loads(job.trace_context)["traceparent"].split("-")[2]


def stored(jobs):
    return [Job.objects.get(pk=job.pk) for job in jobs]


def test_with_no_active_span_nothing_is_stored_and_no_span_made():
    memory = in_memory()
    jobs = [Job.enqueue("noop"), *Job.enqueue_many("noop", [{}, {}])]
    assert [job.trace_context for job in stored(jobs)] == [None] * 3
    assert finished(memory) == []


def test_each_insert_path_stores_its_enqueue_spans_context():
    memory = in_memory()
    with trace.get_tracer("test").start_as_current_span("caller"):
        one = Job.enqueue("noop", queue="mail")
        many = Job.enqueue_many("noop", [{"n": 1}, {"n": 2}, {"n": 3}], priority="low")
        unique = Job.enqueue("noop", unique_key="once")
        duplicate = Job.enqueue("noop", unique_key="once")
        dependent = Job.enqueue("noop", depends_on=[one])
    spans = finished(memory)
    caller = spans[-1]
    sends = spans[:-1]
    assert [s.name for s in sends] == ["send mail"] + ["send default"] * 4
    assert all(s.parent_id == caller.span_id and s.trace_id == caller.trace_id for s in sends)
    assert all(s.kind == "SpanKind.PRODUCER" for s in sends)
    assert sends[1].attributes["messaging.batch.message_count"] == 3
    assert "messaging.message.id" not in sends[1].attributes
    one, *many, unique, dependent = stored([one, *many, unique, dependent])
    assert span_id_of(one) == sends[0].span_id
    assert {span_id_of(job) for job in many} == {sends[1].span_id}
    assert span_id_of(unique) == sends[2].span_id
    assert duplicate.pk == unique.pk  # the duplicate's enqueue stored nothing of its own
    assert span_id_of(dependent) == sends[4].span_id


def test_a_failed_enqueue_span_records_the_error():
    memory = in_memory()
    with trace.get_tracer("test").start_as_current_span("caller"), \
            pytest.raises(InvalidJob):
        Job.enqueue("no_such_type")
    assert [s.name for s in finished(memory)] == ["caller"]  # refused before the span
    memory.clear()

    def refuse(sender, **kwargs):
        raise RuntimeError("refused by a receiver")

    pre_save.connect(refuse, sender=Job)
    try:
        with trace.get_tracer("test").start_as_current_span("caller"), \
                pytest.raises(RuntimeError):
            Job.enqueue("noop")
    finally:
        pre_save.disconnect(refuse, sender=Job)
    [failed, _caller] = finished(memory)
    assert failed.name == "send default" and failed.status == "ERROR"
    assert failed.events == ["exception"] and failed.attributes["error.type"] == "RuntimeError"
    assert not Job.objects.exists()


def test_follow_ups_and_callbacks_continue_the_attempts_trace():
    memory = in_memory()
    with trace.get_tracer("test").start_as_current_span("caller"):
        job = Job.enqueue("follows_up", callback_url="http://127.0.0.1:9/hook")
    run_burst(queues=["default"])
    spans = finished(memory)
    [attempt] = [s for s in spans if s.name == "process default"
                 and s.attributes["messaging.message.id"] == job.public_id]
    follow_up = Job.objects.get(type="noop")
    callback = Job.objects.get(type=CALLBACK_TYPE)
    sends = {s.span_id: s for s in spans if s.kind == "SpanKind.PRODUCER"}
    for child in (follow_up, callback):
        send = sends[span_id_of(child)]
        assert send.parent_id == attempt.span_id and send.trace_id == attempt.trace_id


def test_the_package_works_without_opentelemetry():
    """``opentelemetry`` blocked from import: enqueue, a worker's run, the API and the
    follow-ups work as ever, and nothing is stored."""
    script = (
        "import sys; sys.modules['opentelemetry'] = None\n"
        "import django; django.setup()\n"
        "from django_jobs.core import tracing\n"
        "from django_jobs.models import Job\n"
        "from tests.helpers import run_burst\n"
        "job = Job.enqueue('follows_up', queue='untraced')\n"
        "run_burst(queues=['untraced'])\n"
        "job.refresh_from_db()\n"
        "assert job.status == 'completed', job.status\n"
        "assert tracing.api(load=True) is None\n"
        "print(sorted(Job.objects.filter(queue__in=['untraced', 'default'])"
        ".values_list('type', 'status', 'trace_context')))\n"
    )
    db = settings.DATABASES["default"]["NAME"]
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": settings_module(), "JOBS_DB_NAME": str(db)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(sorted([
        ("follows_up", "completed", None), ("noop", "pending", None)]))


def test_aenqueue_stores_the_context_of_the_awaiting_span():
    from asgiref.sync import async_to_sync

    memory = in_memory()

    async def view():
        with trace.get_tracer("test").start_as_current_span("view"):
            return await Job.aenqueue("noop")

    job = async_to_sync(view)()
    [send, view_span] = finished(memory)
    assert send.parent_id == view_span.span_id
    assert span_id_of(Job.objects.get(pk=job.pk)) == send.span_id


def test_a_job_enqueued_outside_any_trace_gets_an_attempt_span_of_its_own():
    """With a tracer provider, an attempt is traced even when its enqueue was not: a root span,
    with no link."""
    memory = in_memory()
    job = Job.enqueue("noop", queue="untraced")
    run_burst(queues=["untraced"])
    [attempt] = finished(memory)
    assert attempt.name == "process untraced" and attempt.parent_id is None
    assert attempt.links == [] and attempt.attributes["messaging.message.id"] == job.public_id
    assert attempt.attributes["django_jobs.job.outcome"] == "completed"
    assert Job.objects.get(pk=job.pk).trace_context is None
