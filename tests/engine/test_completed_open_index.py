"""The open partition's index of completed jobs (migration 0029, PostgreSQL's partitioned
table): a list of completed jobs, newest first, ends its open partition's branch at once,
however many open jobs that partition holds."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from django.core.management import call_command
from django.db import connection

from django_jobs.core import clock
from django_jobs.models import Job
from tests.conftest import requires_postgres

pytestmark = [requires_postgres, pytest.mark.django_db]

INDEX = "django_jobs_completed_open"
OPEN_JOBS = 3_000


def branch(plan: dict[str, Any], relation: str) -> dict[str, Any]:
    """The scan node of ``relation`` in a JSON plan."""
    if plan.get("Relation Name") == relation:
        return plan
    for child in plan.get("Plans", ()):
        found = branch(child, relation)
        if found:
            return found
    return {}


def open_branch() -> dict[str, Any]:
    newest = Job.objects.filter(status=Job.Status.COMPLETED).order_by("-created_at", "-id")[:50]
    plan = json.loads(newest.explain(analyze=True, format="json"))[0]["Plan"]
    return branch(plan, "django_jobs_job_open")


@pytest.fixture
def open_jobs_and_a_completed_one():
    """``OPEN_JOBS`` pending jobs in the open partition and one completed job in tomorrow's
    partition. No ``ANALYZE``: its figures outlive the test's rollback, and later tests'
    plans would read them."""
    tomorrow = (clock.now() + timedelta(days=1)).date()
    with connection.cursor() as cursor:
        cursor.execute("""
            INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue,
                run_at, attempt, max_attempts, created_at, updated_at, worker_id,
                cancel_requested, callback_url, has_dependents, crashes, finished_at, shelf)
            SELECT 'j-' || g, 'noop', '{}', CASE WHEN g = 0 THEN 'completed' ELSE 'pending' END,
                0, 'default', now(), 0, 3, now() - g * interval '1 second', now(), '', false,
                '', false, 0, CASE WHEN g = 0 THEN now() END,
                CASE WHEN g = 0 THEN %s ELSE DATE '1000-01-01' END
            FROM generate_series(0, %s) g""", [tomorrow, OPEN_JOBS])


def test_migrate_builds_the_index_on_the_open_partition_alone():
    with connection.cursor() as cursor:
        cursor.execute("SELECT c.relname, i.indisvalid, pg_get_indexdef(i.indexrelid) "
                       "FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid "
                       "WHERE pg_get_indexdef(i.indexrelid) LIKE %s",
                       ["%status)::text = 'completed'%"])
        found = cursor.fetchall()
    assert found == [(
        "django_jobs_job_open", True,
        f"CREATE INDEX {INDEX} ON public.django_jobs_job_open USING btree (created_at DESC) "
        "WHERE ((status)::text = 'completed'::text)")]


def test_the_open_branch_of_a_completed_list_reads_no_open_job(open_jobs_and_a_completed_one):
    found = open_branch()
    assert found["Index Name"] == INDEX
    assert found["Actual Rows"] == 0
    assert found.get("Rows Removed by Filter", 0) == 0
    assert list(Job.objects.filter(status=Job.Status.COMPLETED).values_list(
        "public_id", flat=True)) == ["j-0"]
    # Without it, the branch reads every open job before it can say it has none.
    with connection.cursor() as cursor:
        cursor.execute(f"DROP INDEX {INDEX}")
    without = open_branch()
    assert without.get("Index Name") != INDEX
    assert without.get("Rows Removed by Filter", 0) == OPEN_JOBS


def test_sqlmigrate_prints_the_build_and_the_drop_of_an_invalid_one(capsys):
    call_command("sqlmigrate", "django_jobs", "0029")
    out = capsys.readouterr().out
    assert f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX};" in out
    assert (f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON django_jobs_job_open "
            "(created_at DESC) WHERE status = 'completed';") in out
