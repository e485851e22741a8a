"""``mariadbenqueue.insert_many`` writes what Django's own ``bulk_create`` writes, for every field.

Jobs that share every value but their payload (what ``enqueue_many`` makes) are inserted both
ways, with the shared values sent once (``varying`` from ``instances``) and with every value sent
per row; each row must read back, as the driver returns its columns and as the ORM decodes
them, equal to the row ``bulk_create`` wrote for the same values.
"""

import os
import uuid

import pytest
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import given
from hypothesis import strategies as st

from django_jobs.core import clock
from django_jobs.core.validation import check_payload, enqueue_fields
from django_jobs.engine.mariadb import enqueue as mariadbenqueue
from django_jobs.models import Job
from django_jobs.models.instances import build, varying
from tests.engine.test_bulk_insert import COMPARED, other_fields, stored
from tests.json_strategies import python_values

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(os.environ.get("DJANGO_JOBS_TEST_DB", "sqlite") != "mariadb",
                       reason="needs MariaDB"),
]

# Strings that JSON fields must store as strings, never parse as JSON text
json_like = st.sampled_from(['{"a": 1}', "[1, 2]", "null", "true", "1e999", '"quoted"', "",
                             "\\u00e9", "\\", '\\"', "é😀\n\t\r\x7f"])
payloads_of = st.lists(python_values | json_like, min_size=1, max_size=4)


def rfc_lease_token(fields: dict) -> dict:
    """MariaDB's UUID type refuses a UUID of another variant, sent by either insert: the
    token as the RFC 4122 UUID of the same bits (the engine's tokens are uuid4s)."""
    if fields.get("lease_token") is not None:
        fields["lease_token"] = uuid.UUID(int=fields["lease_token"].int, version=4)
    return fields


maria_fields = other_fields.map(rfc_lease_token)


def raw_rows(jobs: list[Job]) -> list[tuple]:
    """Each job's row as the driver returns it (JSON columns as their text), in ``jobs``' order."""
    columns = ", ".join(connection.ops.quote_name(Job._meta.get_field(name).column)
                        for name in COMPARED)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id, {columns} FROM {Job._meta.db_table} "
                       f"WHERE id IN ({', '.join(['%s'] * len(jobs))})", [j.pk for j in jobs])
        by_pk = {row[0]: row[1:] for row in cursor.fetchall()}
    return [by_pk[job.pk] for job in jobs]


def both_ways(payloads: list, shared: dict, per_row: bool) -> tuple[list, list]:
    with transaction.atomic():  # each example leaves no row behind
        try:
            ours = [build(Job, {"payload": check_payload(p), **shared}) for p in payloads]
            mariadbenqueue.insert_many(ours, "default",
                                       None if per_row else varying(Job, shared=shared))
            ours_stored = (raw_rows(ours), stored(ours), [j.pk for j in ours])
            Job.objects.filter(pk__in=[job.pk for job in ours]).delete()  # frees the key
            djangos = Job.objects.bulk_create(
                [Job(payload=check_payload(p), **shared) for p in payloads])
            ids = [j.pk for j in djangos]
            return (ours_stored[:2], ours_stored[2]), ((raw_rows(djangos), stored(djangos)), ids)
        finally:
            transaction.set_rollback(True)


@given(payloads=payloads_of, shared=maria_fields, per_row=st.booleans())
def test_insert_many_writes_each_field_as_bulk_create_does(payloads, shared, per_row):
    if len(payloads) > 1:
        shared.pop("unique_key", None)  # a key is held by one job
    (ours, our_ids), (djangos, their_ids) = both_ways(payloads, shared, per_row)
    assert ours == djangos
    assert our_ids == sorted(our_ids) and their_ids == sorted(their_ids)  # in the jobs' order


@given(payloads=payloads_of)
def test_enqueue_many_options_are_stored_as_bulk_create_stores_them(payloads):
    shared = enqueue_fields("noop", priority="high", queue="mail", delay=30, max_attempts=7)
    (ours, _), (djangos, _) = both_ways(payloads, shared, per_row=False)
    assert ours == djangos


def test_enqueue_many_is_one_insert_from_json_table_giving_each_job_its_row_in_order():
    clock.now("default")  # the clock's first reading in a process is a query of its own
    with CaptureQueriesContext(connection) as queries:
        jobs = Job.enqueue_many("echo", [{"n": n} for n in range(5)], priority="low")
    (insert,) = [q["sql"] for q in queries.captured_queries]
    assert insert.startswith("INSERT") and "JSON_TABLE" in insert
    assert [(j._state.adding, j._state.db) for j in jobs] == [(False, "default")] * 5
    stored_jobs = Job.objects.in_bulk([j.pk for j in jobs])
    assert [stored_jobs[j.pk].payload for j in jobs] == [{"n": n} for n in range(5)]
    assert [stored_jobs[j.pk].public_id for j in jobs] == [j.public_id for j in jobs]
    assert [j.pk for j in jobs] == sorted(j.pk for j in jobs)
