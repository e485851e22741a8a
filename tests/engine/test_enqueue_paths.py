"""The enqueue's fast path on PostgreSQL (``PostgresInserts``: ``engine/postgres/enqueue.py``)
held to the plain Django path (the ORM's engine, whose INSERT is ``save()``): for any options
and payload, ``enqueue`` and ``enqueue_many`` store the same rows, or refuse them with the same
error."""

from datetime import timedelta

import pytest
from django.db import transaction
from hypothesis import given, settings
from hypothesis import strategies as st

from django_jobs.core.contract import EnqueueOptions, engine
from django_jobs.engine.portable import RowLockEngine
from django_jobs.engine.postgres.engine import PostgresEngine
from django_jobs.exceptions import InvalidJob
from django_jobs.models import Job
from tests.conftest import requires_postgres
from tests.json_strategies import python_values

pytestmark = [pytest.mark.django_db, requires_postgres]

options = st.builds(
    EnqueueOptions,
    priority=st.sampled_from(["low", "normal", "high", "urgent"]) | st.integers(-120, 120),
    queue=st.none() | st.from_regex(r"[a-z0-9_.\-]{1,12}", fullmatch=True) | st.just("no space"),
    delay=st.none() | st.integers(-1, 10**6) | st.timedeltas(timedelta(0), timedelta(days=9)),
    max_attempts=st.none() | st.integers(0, 1001),
)
# Each row's values but those an enqueue makes new each time (its id, public id and times)
COMPARED = [f.attname for f in Job._meta.concrete_fields
            if f.attname not in ("id", "public_id", "run_at", "created_at", "updated_at")]


def stored(jobs):
    rows = {row.pop("id"): row for row in Job.objects.filter(pk__in=[j.pk for j in jobs]).values(
        "id", "run_at", "created_at", *COMPARED)}
    found = [rows[job.pk] for job in jobs]
    for row in found:  # when it is due, from when it was enqueued
        row["due_in"] = row.pop("run_at") - row.pop("created_at")
    return found


def outcome(verb):
    """What ``verb()`` stored, or the error it raised; nothing is left behind."""
    with transaction.atomic():
        try:
            made = verb()
            return stored(made if isinstance(made, list) else [made])
        except InvalidJob as exc:
            return exc.message_dict
        finally:
            transaction.set_rollback(True)


def test_the_jobs_database_has_the_fast_path():
    assert type(engine("default")) is PostgresEngine


@settings(max_examples=60, deadline=None)
@given(payload=python_values, given_options=options)
def test_enqueue_stores_what_the_plain_django_path_stores(payload, given_options):
    plain = RowLockEngine("default")
    fast = outcome(lambda: engine("default").enqueue("noop", payload, given_options))
    assert fast == outcome(lambda: plain.enqueue("noop", payload, given_options))


@settings(max_examples=40, deadline=None)
@given(payloads=st.lists(python_values, min_size=1, max_size=4), given_options=options)
def test_enqueue_many_stores_what_the_plain_django_path_stores(payloads, given_options):
    plain = RowLockEngine("default")
    fast = outcome(lambda: engine("default").enqueue_many("noop", payloads, given_options))
    assert fast == outcome(lambda: plain.enqueue_many("noop", payloads, given_options))
