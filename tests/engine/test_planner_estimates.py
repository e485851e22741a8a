"""The planner's estimates (``models/counts.py``) are planned without JIT compilation on
PostgreSQL, in a transaction, and leave the session's JIT setting as it was."""

from __future__ import annotations

import json

import pytest
from django.db import DatabaseError, connection, transaction

from django_jobs.models import Job
from django_jobs.models.counts import planner_estimate, planner_estimates, without_jit
from tests.conftest import requires_postgres

pytestmark = [requires_postgres, pytest.mark.django_db]


def jit_in_plan() -> bool:
    """Whether PostgreSQL compiles the plan of a jobs query (with ``jit_above_cost = 0`` set
    by the test, every plan would be, where the server has JIT)."""
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (FORMAT JSON) SELECT id FROM django_jobs_job WHERE status = 'x'")
        plan = cursor.fetchone()[0]  # psycopg loads the json column
        return "JIT" in (json.loads(plan) if isinstance(plan, str) else plan)[0]


def setting(name: str) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SHOW {name}")
        return cursor.fetchone()[0]


@pytest.fixture
def jit_for_every_plan():
    with connection.cursor() as cursor:
        cursor.execute("SET jit = on")
        cursor.execute("SET jit_above_cost = 0")
    if not jit_in_plan():
        pytest.skip("this server has no JIT compiler")
    yield
    with connection.cursor() as cursor:
        cursor.execute("RESET jit_above_cost")
        cursor.execute("RESET jit")


def test_a_plan_inside_is_not_compiled_and_the_setting_comes_back(jit_for_every_plan):
    with without_jit(connection.alias):
        assert not jit_in_plan()
    assert jit_in_plan()
    assert setting("jit") == "on"


def sent_by(work) -> list[str]:
    sent: list[str] = []

    def log(execute, sql, params, many, context):
        sent.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(log):
        work()
    return sent


def test_the_estimates_send_their_explain_without_jit(jit_for_every_plan):
    jobs = Job.objects.filter(status="dead")
    sent = sent_by(lambda: (planner_estimate(jobs),
                            planner_estimates([jobs, Job.objects.filter(status="pending")])))
    explains = [i for i, sql in enumerate(sent) if sql.startswith("EXPLAIN")]
    assert len(explains) == 2
    for i in explains:
        assert sent[i - 1] == "SET LOCAL jit = off"
    assert setting("jit") == "on"


def test_in_the_callers_transaction_the_setting_comes_back_inside_it(jit_for_every_plan):
    with transaction.atomic():
        sent = sent_by(lambda: planner_estimate(Job.objects.filter(status="dead")))
        assert setting("jit") == "on"
        assert jit_in_plan()
    assert sent[-1].startswith("SELECT set_config('jit'")


def test_a_failed_statement_in_a_transaction_leaves_the_setting_to_its_rollback(
        jit_for_every_plan):
    with pytest.raises(DatabaseError), transaction.atomic():
        with without_jit(connection.alias), connection.cursor() as cursor:
            cursor.execute("SELECT 1 / 0")
    assert setting("jit") == "on"


@pytest.mark.django_db(transaction=True)
def test_outside_a_transaction_one_of_its_own_ends_the_setting_without_reading_it(
        jit_for_every_plan):
    """In autocommit the estimate's own transaction takes the setting with it: nothing to put
    back, so nothing is read first."""
    assert not connection.in_atomic_block
    sent = sent_by(lambda: planner_estimate(Job.objects.filter(status="dead")))
    assert "SHOW jit" not in sent
    assert "SET LOCAL jit = off" in sent
    assert setting("jit") == "on"
    assert jit_in_plan()
