"""MariaDB: the unique index that stands in for the partial constraint, and the claim's plans."""

import threading

import pytest
from django.db import connection, connections, transaction
from django.utils import timezone

from django_jobs.engine.mariadb.schema import INDEXES, TABLE
from django_jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def mariadb():
    if connection.vendor != "mysql":
        pytest.skip("MariaDB and MySQL only: other databases have partial indexes")


def test_the_migration_made_the_unique_index_on_unique_key():
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, TABLE)
    for name, (unique, columns) in INDEXES.items():
        assert constraints[name]["columns"] == [c.strip() for c in columns.split(",")], name
        assert constraints[name]["unique"] is unique, name


def test_jobs_without_a_key_and_released_keys_share_the_unique_index_as_null():
    Job.enqueue_many("echo", [{}] * 3)
    first = Job.enqueue("echo", unique_key="k")
    Job.objects.filter(pk=first.pk).update(status="completed", unique_key=None)  # released
    second = Job.enqueue("echo", unique_key="k")
    assert not second.duplicate and second.pk != first.pk
    assert Job.objects.filter(unique_key__isnull=True).count() == 4


def explain(queryset) -> list[dict]:
    """MariaDB's EXPLAIN rows for ``queryset``, as dicts by column name."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


@pytest.mark.django_db(transaction=True)  # ANALYZE TABLE commits: no test transaction around
def test_claim_and_rescue_read_only_their_own_states_among_many_finished_rows():
    # Inserted finished: rows moved there by UPDATE leave delete-marked index entries that
    # skew the estimates until InnoDB purges them.
    now = timezone.now()
    Job.objects.bulk_create(Job(type="echo", status="completed", finished_at=now)
                            for _ in range(3000))
    Job.enqueue_many("echo", [{}] * 5)
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE TABLE {TABLE}")
    # Django made the partial indexes of Job.Meta full ones here; they still bound both reads.
    for queryset in (Job.objects.ready()[:10], Job.objects.ready(["default"])[:10],
                     Job.objects.stale()):
        [plan] = explain(queryset)
        rows = int(str(plan["rows"]).split()[0])  # "1 (0%)" with a rowid filter
        # Fewer than the finished rows: an index on the state, not a scan of the table. (Rows
        # deleted by earlier tests stay in the estimate until InnoDB purges them.)
        assert plan["key"] is not None and rows < 3000, (str(queryset.query), plan)


@pytest.mark.django_db(transaction=True)
def test_a_claim_holding_its_rows_leaves_the_other_ready_rows_to_other_workers():
    """One worker's claim transaction is still open; another worker claims at that moment and
    gets the next jobs, not nothing (locking all the sorted ready rows would leave it none)."""
    Job.enqueue_many("echo", [{}] * 50)
    other: list[int] = []

    def second_worker() -> None:
        try:
            claimed = Job.objects.claim(worker_id="second", limit=10, lease_seconds=30)
            other.extend(job.pk for job in claimed)
        finally:
            connections.close_all()

    with transaction.atomic():
        first = Job.objects.claim(worker_id="first", limit=10, lease_seconds=30)
        thread = threading.Thread(target=second_worker)
        thread.start()
        thread.join()
    assert len(first) == 10 and len(other) == 10
    assert not {job.pk for job in first} & set(other)
