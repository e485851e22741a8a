"""Fixtures of the engine's tests."""

from collections.abc import Iterator

import pytest
from django.db import connection, transaction


@pytest.fixture
def jobs_table() -> Iterator[None]:
    """A temporary, never analyzed copy of the jobs table shadowing it in this transaction (and
    of the attempts table, where it is partitioned)."""
    if connection.vendor != "postgresql":
        pytest.skip("plans are checked on PostgreSQL")
    with transaction.atomic(), connection.cursor() as cursor:
        # On the partitioned tables (migration 0028), copies of their open partitions, the
        # ones the claim and the finish's fenced writes read, with the plain table's index
        # names (a partition's are ``<name>_open``) and without the unique indexes on
        # ``(…, shelf)`` that only the parent's unique indexes need.
        cursor.execute("SELECT to_regclass('public.django_jobs_job_open') IS NOT NULL")
        parted = cursor.fetchone()[0]
        tables = ["django_jobs_job", "django_jobs_jobattempt"] if parted else ["django_jobs_job"]
        for table in tables:
            source = f"{table}_open" if parted else table
            cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = "
                           "'public' AND tablename = %s", [source])
            indexes = cursor.fetchall()
            cursor.execute(
                f"CREATE TEMPORARY TABLE {table} (LIKE public.{source} INCLUDING "
                "DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS) ON COMMIT DROP"
            )
            if parted:  # the open partition's bound: the copy stands for a plain table
                cursor.execute(f"ALTER TABLE pg_temp.{table} DROP CONSTRAINT IF EXISTS "
                               f"{table}_below_d")
            for name, definition in indexes:
                if parted and name.endswith("_s"):
                    continue
                plain = name.removesuffix("_open") if parted else name
                cursor.execute(definition.replace(f"INDEX {name} ", f"INDEX {plain} ", 1)
                               .replace(f" ON public.{source} ", f" ON pg_temp.{table} "))
        yield
        transaction.set_rollback(True)
