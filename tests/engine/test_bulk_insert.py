"""``pgenqueue.insert_many`` writes what Django's own ``bulk_create`` writes, and
``pgenqueue.insert`` what ``save()`` writes, for every field.

Jobs that share every value but their payload (what ``enqueue_many`` makes) are inserted both
ways, with the shared values sent once (``varying`` from ``instances``) and with every value sent
per row, and each row read back must equal the row ``bulk_create`` wrote for the same values.
"""

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest
from django.db import transaction
from hypothesis import given
from hypothesis import strategies as st

from django_jobs.core.validation import check_payload, enqueue_fields
from django_jobs.engine.postgres import enqueue as pgenqueue
from django_jobs.models import Job
from django_jobs.models.instances import build, varying
from tests.conftest import requires_postgres
from tests.json_strategies import python_values

pytestmark = [pytest.mark.django_db, requires_postgres]

# Text PostgreSQL can store: no NUL, no lone surrogate.
stored_text = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
times = st.datetimes(
    min_value=datetime(1000, 1, 1), max_value=datetime(9000, 1, 1),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)),
                               timezone(-timedelta(hours=9))]),
)

# A value for every field of Job but its pk, public_id and payload: each field type, at its
# bounds, None where the column takes NULL.
# What an enqueue stores of the active span (core/tracing.py), and any other text
trace_contexts = st.builds(
    lambda trace, span, flags, state: json.dumps(
        {"traceparent": f"00-{trace:032x}-{span:016x}-{flags:02x}",
         **({"tracestate": state} if state else {})}, separators=(",", ":")),
    st.integers(1, 2**128 - 1), st.integers(1, 2**64 - 1), st.sampled_from([0, 1]),
    st.sampled_from(["", "vendor=opaque", "a=1,b=2 c", "k" * 250 + "=" + "v" * 250]),
) | st.text(stored_text, max_size=600)
other_fields = st.fixed_dictionaries({
    # enqueue_many always gives these; their defaults would call now() once per job
    "run_at": times, "created_at": times, "updated_at": times,
}, optional={
    "status": st.sampled_from([s for s, _ in Job.Status.choices]),
    "priority": st.integers(-32768, 32767),
    "queue": st.text(stored_text, min_size=1, max_size=100),
    "attempt": st.integers(0, 2**31 - 1),
    "max_attempts": st.integers(0, 32767),
    "crashes": st.integers(0, 32767),
    "result": st.none() | python_values,
    "error": st.none() | python_values,
    "started_at": st.none() | times,
    "finished_at": st.none() | times,
    "worker_id": st.text(stored_text, max_size=100),
    "lease_token": st.none() | st.uuids(),
    "leased_until": st.none() | times,
    "cancel_requested": st.booleans(),
    "callback_url": st.text(stored_text, max_size=2000),
    "unique_key": st.none() | st.text(stored_text, max_size=255),
    "progress": st.none() | python_values,
    "has_dependents": st.booleans(),
    "trace_context": st.none() | trace_contexts,
})

COMPARED = [f.attname for f in Job._meta.concrete_fields if f.attname not in ("id", "public_id")]


def stored(jobs: list[Job]) -> list[dict]:
    rows = Job.objects.filter(pk__in=[j.pk for j in jobs]).values("pk", *COMPARED)
    by_pk = {row.pop("pk"): row for row in rows}
    return [by_pk[job.pk] for job in jobs]


def both_ways(payloads: list, shared: dict, per_row: bool) -> tuple[list[dict], list[dict]]:
    with transaction.atomic():  # each example leaves no row behind, and no failed transaction
        try:
            return _both_ways(payloads, shared, per_row)
        finally:
            transaction.set_rollback(True)


def _both_ways(payloads: list, shared: dict, per_row: bool) -> tuple[list[dict], list[dict]]:
    ours = [build(Job, {"payload": check_payload(p), **shared}) for p in payloads]
    pgenqueue.insert_many(ours, "default", None if per_row else varying(Job, shared=shared))
    ours_stored = stored(ours)
    Job.objects.filter(pk__in=[job.pk for job in ours]).delete()  # frees the unique key
    djangos = Job.objects.bulk_create([Job(payload=check_payload(p), **shared) for p in payloads])
    return ours_stored, stored(djangos)


@given(payloads=st.lists(python_values, min_size=1, max_size=4), shared=other_fields,
       per_row=st.booleans())
def test_insert_many_writes_each_field_as_bulk_create_does(payloads, shared, per_row):
    if len(payloads) > 1:
        shared.pop("unique_key", None)  # a key is held by one job
    ours, djangos = both_ways(payloads, shared, per_row)
    assert ours == djangos


@given(payload=python_values, fields=other_fields)
def test_insert_writes_each_field_as_save_does(payload, fields):
    """``pgenqueue.insert``, one job's INSERT (``enqueue``), against ``save()``."""
    with transaction.atomic():
        try:
            ours = build(Job, {"payload": check_payload(payload), **fields})
            pgenqueue.insert(ours, "default")
            ours_stored = stored([ours])
            Job.objects.filter(pk=ours.pk).delete()  # frees the unique key
            django = Job(payload=check_payload(payload), **fields)
            django.save(force_insert=True)
            assert ours_stored == stored([django])
        finally:
            transaction.set_rollback(True)


@given(payloads=st.lists(python_values, min_size=1, max_size=4))
def test_enqueue_many_options_are_stored_as_bulk_create_stores_them(payloads):
    shared = enqueue_fields("noop", priority="high", queue="mail", delay=30, max_attempts=7)
    ours, djangos = both_ways(payloads, shared, per_row=False)
    assert ours == djangos


def test_insert_many_sets_each_jobs_pk_and_state_and_the_shared_values_once():
    shared = enqueue_fields("noop", priority="low")
    jobs = [build(Job, {"payload": {"n": n}, **shared}) for n in range(3)]
    assert varying(Job, shared=shared) == {"payload", "public_id"}
    pgenqueue.insert_many(jobs, "default", varying(Job, shared=shared))
    for job in jobs:
        assert (job._state.adding, job._state.db) == (False, "default")
        assert Job.objects.get(pk=job.pk).public_id == job.public_id
    assert len({job.public_id for job in jobs}) == 3


def test_nothing_is_said_to_be_shared_when_init_receivers_may_change_values():
    from django.db.models.signals import post_init

    def receiver(sender, instance, **kwargs):
        instance.worker_id = f"w-{id(instance)}"

    post_init.connect(receiver, sender=Job)
    try:
        assert varying(Job, shared={"type": "noop"}) is None
        jobs = Job.enqueue_many("noop", [{"n": 1}, {"n": 2}])
    finally:
        post_init.disconnect(receiver, sender=Job)
    assert [Job.objects.get(pk=j.pk).worker_id for j in jobs] == [j.worker_id for j in jobs]
    assert jobs[0].worker_id != jobs[1].worker_id



@pytest.mark.parametrize("listened", [False, True])
def test_build_many_makes_what_the_model_makes_for_the_same_values(listened):
    """With or without a pre_init receiver (then the model itself is called)."""
    from django.db.models.signals import pre_init

    from django_jobs.models.instances import build_many

    seen = []

    def receiver(sender, args, kwargs, **extra):
        seen.append(kwargs["payload"])

    shared = enqueue_fields("noop", priority="high", queue="mail")
    if listened:
        pre_init.connect(receiver, sender=Job)
    try:
        built = build_many(Job, shared, "payload", [{"n": 1}, {"n": 2}])
    finally:
        pre_init.disconnect(receiver, sender=Job)
    made = [Job(payload={"n": n}, **shared) for n in (1, 2)]
    names = [f.attname for f in Job._meta.concrete_fields if f.attname != "public_id"]
    assert [{n: getattr(j, n) for n in names} for j in built] == \
        [{n: getattr(j, n) for n in names} for j in made]
    assert built[0].public_id != built[1].public_id
    assert [(j._state.adding, j._state.db) for j in built] == [(True, None)] * 2
    assert seen == ([{"n": 1}, {"n": 2}] if listened else [])
