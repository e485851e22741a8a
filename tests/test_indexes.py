"""The jobs table's list indexes serve the lists they are for (PostgreSQL plans)."""

import pytest
from django.db import connection, transaction

from django_jobs.models import LISTED_BY_STATUS, Job

pytestmark = pytest.mark.django_db


def plan_of(queryset) -> str:
    """The plan PostgreSQL picks when it may not read the table in full."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        return queryset.explain()


@pytest.fixture
def postgres():
    if connection.vendor != "postgresql":
        pytest.skip("index plans are checked on PostgreSQL")


@pytest.mark.parametrize("status", LISTED_BY_STATUS)
def test_a_list_of_a_listed_state_reads_the_status_index(postgres, status):
    newest = Job.objects.filter(status=status).order_by("-created_at")[:50]
    assert "django_jobs_status_idx" in plan_of(newest)


@pytest.mark.parametrize("status", ["completed", "processing"])
def test_processing_and_completed_rows_are_not_in_the_status_index(postgres, status):
    """Their lists take another index: the status index cannot answer for them."""
    newest = Job.objects.filter(status=status).order_by("-created_at")[:50]
    plan = plan_of(newest)
    assert "django_jobs_status_idx" not in plan
    assert "django_jobs_created_idx" in plan or "django_jobs_lease_idx" in plan


def test_the_status_index_leaves_out_exactly_processing_and_completed():
    all_states = {value for value, _ in Job.Status.choices}
    assert all_states - set(LISTED_BY_STATUS) == {"processing", "completed"}
