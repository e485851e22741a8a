"""A task enqueued through the ``django.tasks`` backend stores the active trace context."""

import json

import pytest
from django.conf import settings
from opentelemetry import trace

from django_jobs.models import Job
from tests.tracing_support import finished, in_memory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(not settings.HAS_TASKS_FRAMEWORK,
                       reason="needs django.tasks or the django-tasks backport"),
]


def test_a_task_enqueued_in_a_span_carries_its_enqueue_spans_context():
    from tests import tasks as test_tasks

    memory = in_memory()
    result = test_tasks.noop_task.enqueue()
    assert Job.objects.get(public_id=result.id).trace_context is None
    with trace.get_tracer("test").start_as_current_span("view"):
        result = test_tasks.noop_task.enqueue()
    [send, view] = finished(memory)
    assert send.parent_id == view.span_id and send.kind == "SpanKind.PRODUCER"
    stored = json.loads(Job.objects.get(public_id=result.id).trace_context)
    assert stored["traceparent"].split("-")[1:3] == [send.trace_id[2:], send.span_id[2:]]
