"""The worker's connection runs the engine's prepared statements on their generic plans.

PostgreSQL's default plans a prepared statement for its values on its first five runs, and
later whenever the generic plan looks costlier than those did; the turn was then planned again
on every call. ``keep_generic_plans`` asks the session for the generic plan on every run, and
the worker asks it of its loop's connection for as long as it runs.
"""

import pytest
from django.db import connection

from django_jobs.engine.postgres import pooler
from django_jobs.engine.postgres.cursor import keep_generic_plans
from django_jobs.models import Job
from tests.helpers import run_burst

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def prepared():
    """PostgreSQL, on a new connection the engine prepares its statements on (none prepared
    yet); unmarked and closed after, so the session's setting ends with it."""
    if connection.vendor != "postgresql":
        pytest.skip("prepared statements' plans are PostgreSQL's")
    connection.close()
    connection.ensure_connection()
    if not pooler.prepares(connection, connection.connection):
        pytest.skip("this connection does not prepare (a transaction pooler)")
    yield
    keep_generic_plans(connection, keep=False)
    connection.close()


def insert_plans() -> tuple[int, int]:
    """The generic and custom plans this session's prepared INSERT of jobs has run on."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT generic_plans, custom_plans FROM pg_prepared_statements "
                       "WHERE statement LIKE %s", ['INSERT INTO "django_jobs_job"%'])
        rows = cursor.fetchall()
    assert len(rows) == 1, rows  # one INSERT prepared for the enqueues below
    return rows[0]


def enqueue_seven() -> None:
    for n in range(7):
        Job.enqueue("echo", {"n": n})


def test_by_default_the_first_runs_are_planned_for_their_values(prepared):
    """The control: without the setting, PostgreSQL plans the first five runs anew."""
    enqueue_seven()
    generic, custom = insert_plans()
    assert custom == 5
    assert generic == 2


def test_a_connection_kept_to_generic_plans_plans_no_run_for_its_values(prepared):
    keep_generic_plans(connection)
    enqueue_seven()
    generic, custom = insert_plans()
    assert custom == 0
    assert generic == 7


def test_the_worker_keeps_its_loop_connection_to_generic_plans_while_it_runs(prepared):
    assert not getattr(connection, "_django_jobs_generic_plans", False)
    run_burst()  # nothing to run: one claim, on this thread's connection
    with connection.cursor() as cursor:
        cursor.execute("SHOW plan_cache_mode")
        assert cursor.fetchone()[0] == "force_generic_plan"
    # after the run the connection no longer asks for it (the site's code may share it)
    assert connection._django_jobs_generic_plans is False
