"""Fixtures of the engine's tests."""

from collections.abc import Iterator

import pytest
from django.db import connection, transaction


@pytest.fixture
def jobs_table() -> Iterator[None]:
    """A temporary, never analyzed copy of the jobs table shadowing it in this transaction."""
    if connection.vendor != "postgresql":
        pytest.skip("plans are checked on PostgreSQL")
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SELECT indexdef FROM pg_indexes WHERE schemaname = 'public' "
                       "AND tablename = 'django_jobs_job'")
        indexes = [row[0] for row in cursor.fetchall()]
        cursor.execute(
            "CREATE TEMPORARY TABLE django_jobs_job (LIKE public.django_jobs_job INCLUDING "
            "DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS) ON COMMIT DROP"
        )
        for definition in indexes:
            cursor.execute(definition.replace(" ON public.django_jobs_job ",
                                              " ON pg_temp.django_jobs_job "))
        yield
        transaction.set_rollback(True)
