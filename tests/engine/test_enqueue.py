"""Job.enqueue and enqueue_many: validation, transactions, defaults, one statement."""

from datetime import timedelta

import pytest
from django.db import transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobs import InvalidJob, UnknownJobType
from django_jobs.models import Job
from django_jobs.signals import job_enqueued

pytestmark = pytest.mark.django_db


def test_enqueue_returns_a_pending_job_with_a_public_id():
    job = Job.enqueue("echo", {"a": 1})
    job.refresh_from_db()
    assert job.status == Job.Status.PENDING
    assert job.public_id.startswith("j-") and len(job.public_id) == 22
    int(job.public_id[2:], 16)  # hex
    assert job.payload == {"a": 1}
    assert job.attempt == 0 and job.max_attempts == 3
    assert job.queue == "default" and job.priority == 0


@pytest.mark.parametrize(("name", "value"), [("low", -10), ("normal", 0), ("high", 10),
                                             (-100, -100), (100, 100), (7, 7)])
def test_priority_takes_names_and_integers_in_range(name, value):
    assert Job.enqueue("echo", priority=name).priority == value


@pytest.mark.parametrize("bad", ["urgent", 101, -101, 1.5, True, None])
def test_bad_priority_is_refused_naming_the_field(bad):
    with pytest.raises(InvalidJob) as info:
        Job.enqueue("echo", priority=bad)
    assert "priority" in info.value.message_dict
    assert not Job.objects.exists()


def test_delay_takes_timedelta_or_seconds():
    before = timezone.now()
    a = Job.enqueue("echo", delay=timedelta(seconds=30))
    b = Job.enqueue("echo", delay=30)
    for job in (a, b):
        later = timezone.now() + timedelta(seconds=30)
        assert before + timedelta(seconds=30) <= job.run_at <= later


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"delay": -1}, "delay"),
    ({"delay": "soon"}, "delay"),
    ({"delay": float("nan")}, "delay"),
    ({"delay": 1, "run_at": timezone.now()}, "delay"),
    ({"run_at": "tomorrow"}, "run_at"),
    ({"queue": "no spaces"}, "queue"),
    ({"queue": ""}, "queue"),
    ({"queue": "default\n"}, "queue"),  # a trailing newline: the whole name must match
    ({"max_attempts": 0}, "max_attempts"),
    ({"max_attempts": "3"}, "max_attempts"),
])
def test_bad_arguments_are_refused_naming_the_field(kwargs, field):
    with pytest.raises(InvalidJob) as info:
        Job.enqueue("echo", {}, **kwargs)
    assert field in info.value.message_dict
    assert not Job.objects.exists()


def test_naive_run_at_is_refused_when_use_tz():
    with pytest.raises(InvalidJob) as info:
        Job.enqueue("echo", run_at=timezone.now().replace(tzinfo=None))
    assert "run_at" in info.value.message_dict


@pytest.mark.parametrize("payload", [{"when": timezone.now()}, {1, 2}, {"x": float("inf")}])
def test_payload_that_is_not_json_is_refused(payload):
    with pytest.raises(InvalidJob) as info:
        Job.enqueue("echo", payload)
    assert "payload" in info.value.message_dict
    assert not Job.objects.exists()


def test_unknown_type_is_refused():
    with pytest.raises(UnknownJobType) as info:
        Job.enqueue("no_such_type", {})
    assert "no_such_type" in str(info.value)
    assert isinstance(info.value, InvalidJob)


def test_options_override_handler_and_settings_defaults():
    job = Job.enqueue("flaky", max_attempts=9, queue="emails")
    assert (job.max_attempts, job.queue) == (9, "emails")
    assert Job.enqueue("flaky").max_attempts == 5  # from @handler(max_attempts=5)


@pytest.mark.django_db(transaction=True)
def test_rolled_back_transaction_leaves_no_job():
    with pytest.raises(RuntimeError), transaction.atomic():
        Job.enqueue("echo", {"n": 1})
        raise RuntimeError("the view failed after enqueueing")
    assert not Job.objects.exists()


@pytest.mark.django_db(transaction=True)
def test_committed_transaction_keeps_the_job():
    with transaction.atomic():
        job = Job.enqueue("echo", {"n": 1})
    assert Job.objects.get(pk=job.pk).payload == {"n": 1}


@pytest.mark.parametrize("count", [30, 2000])
def test_enqueue_many_inserts_in_one_statement(count):
    """One INSERT on PostgreSQL; SQLite caps variables per statement (Django batches by 999:
    30 rows of a job's columns stay under it)."""
    from django.db import connection

    if connection.vendor == "sqlite" and count > 30:
        pytest.skip("SQLite splits inserts at 999 variables")
    payloads = [{"n": i} for i in range(count)]
    with CaptureQueriesContext(transaction.get_connection()) as ctx:
        jobs = Job.enqueue_many("echo", payloads, priority="high")
    inserts = [q for q in ctx.captured_queries if q["sql"].lstrip().upper().startswith("INSERT")]
    assert len(inserts) == 1
    assert len(jobs) == count and all(j.pk for j in jobs)
    assert Job.objects.filter(priority=10).count() == count
    assert len({j.public_id for j in jobs}) == count


def test_enqueue_many_refuses_everything_if_one_payload_is_bad():
    with pytest.raises(InvalidJob):
        Job.enqueue_many("echo", [{"ok": 1}, {"bad": object()}])
    assert not Job.objects.exists()


def test_job_enqueued_signal_is_sent():
    seen = []

    def receiver(sender, job, **kwargs):
        seen.append(job.public_id)

    job_enqueued.connect(receiver)
    try:
        job = Job.enqueue("echo")
        many = Job.enqueue_many("echo", [{}, {}])
    finally:
        job_enqueued.disconnect(receiver)
    assert seen == [job.public_id] + [j.public_id for j in many]
