"""The heartbeat's lease renewal finds its rows by primary key whatever the statistics say
(PostgreSQL).

The renewal's rows are processing, and the partial lease index holds exactly the processing
rows, so its statistics, taken when few jobs were processing, make a scan of that whole index
look cheaper than a lookup per held job. While a snapshot older than the worker's claims is
open, that index keeps an entry for every job claimed since, and such a scan passes them all
at every heartbeat of every worker. Each test builds the jobs table in one state, as a
temporary table shadowing it (``jobs_table``, as ``test_claim_plans.py``), and reads the plans
of the statements a heartbeat runs: each read of the jobs table must look ids up in the
primary key, for the plan made for the call's values and for the generic plan of the renewal
prepared once.
"""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from django.db import connection
from django.db.models.sql import UpdateQuery
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobs.engine import engine_for
from django_jobs.models import Job

from .test_claim_plans import custom_plan, generic_plan, nodes

pytestmark = pytest.mark.django_db

JOBS = "django_jobs_job"
PRIMARY_KEY = "django_jobs_job_pkey"
KEYED = re.compile(r"^\(id = ")
HELD = 10  # the jobs one worker holds, under two claims' tokens


def add(count: int, status: str, prefix: str) -> None:
    """Insert ``count`` jobs in ``status``, each under a lease token of its own that runs out
    in 30 seconds (the finished ones keep theirs, as a finish leaves it)."""
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue,
                   run_at, attempt, max_attempts, crashes, created_at, updated_at, worker_id,
                   cancel_requested, callback_url, has_dependents, lease_token, leased_until)
               SELECT %s || lpad(to_hex(g), 19, '0'), 'echo', '{}', %s, 0, 'default',
                   now(), 1, 3, 0, now(), now(), 'w', false, '', false, gen_random_uuid(),
                   now() + interval '30 seconds'
               FROM generate_series(1, %s) AS g""",
            [prefix, status, count],
        )


def analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_jobs_job")


def few_processing_never_analyzed() -> None:
    add(50_000, "completed", "j-c")
    add(40, "processing", "j-p")


def few_processing_analyzed() -> None:
    few_processing_never_analyzed()
    analyze()


def burst_after_analyzed_none_processing() -> None:
    add(50_000, "completed", "j-c")
    analyze()
    add(2_000, "processing", "j-p")


def many_processing_analyzed() -> None:
    add(5_000, "completed", "j-c")
    add(5_000, "processing", "j-p")
    analyze()


STATES = [few_processing_never_analyzed, few_processing_analyzed,
          burst_after_analyzed_none_processing, many_processing_analyzed]


def held_jobs() -> dict[int, uuid.UUID]:
    """Ten processing jobs, as held by a worker that claimed them in two batches."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT id FROM django_jobs_job WHERE status = 'processing' "
                       "ORDER BY id DESC LIMIT %s", [HELD])
        ids = [row[0] for row in cursor.fetchall()]
        tokens = [uuid.uuid4(), uuid.uuid4()]
        held = {pk: tokens[n % 2] for n, pk in enumerate(ids)}
        for pk, token in held.items():
            cursor.execute("UPDATE django_jobs_job SET lease_token = %s WHERE id = %s",
                           [token, pk])
    return held


def renewal_sql(held: dict[int, uuid.UUID]) -> tuple[str, list[Any]]:
    """The renewal's UPDATE as the engine runs it (``QuerySet.update``)."""
    query = engine_for(Job.objects.db).renewal(held).query.chain(UpdateQuery)
    query.add_update_values({"leased_until": timezone.now()})
    query.annotations = {}
    sql, params = query.get_compiler(Job.objects.db).as_sql()
    return sql, list(params)


def faults(plan: dict[str, Any]) -> list[str]:
    """What is wrong with a heartbeat statement's plan; empty if every read of the jobs table
    looks its ids up in the primary key."""
    found = []
    for scan in (n for n in nodes(plan)
                 if n.get("Relation Name") == JOBS and "Scan" in n["Node Type"]):
        by_key = any(n.get("Index Name") == PRIMARY_KEY and KEYED.search(n.get("Index Cond", ""))
                     for n in nodes(scan))
        if not by_key:
            found.append(f"{scan['Node Type']} of {scan.get('Index Name', 'the table')}")
    found += [f"scan of {n['Index Name']}" for n in nodes(plan)
              if n.get("Index Name", PRIMARY_KEY) != PRIMARY_KEY]
    return found


@pytest.mark.usefixtures("jobs_table")
@pytest.mark.parametrize("state", STATES, ids=lambda state: state.__name__)
def test_the_renewal_finds_the_held_jobs_by_primary_key(state):
    state()
    held = held_jobs()
    sql, params = renewal_sql(held)
    found = {name: faults(plan_of(sql, params))
             for name, plan_of in (("custom", custom_plan), ("generic", generic_plan))}
    with CaptureQueriesContext(connection) as queries:
        still, _ = engine_for(Job.objects.db).heartbeat(held=held, lease_seconds=30)
    assert still == set(held)
    run = [q["sql"] for q in queries if JOBS in q["sql"]]
    assert len(run) == 2  # the renewal, and the read of what it left
    for number, statement in enumerate(run):
        found[f"statement {number} as run"] = faults(custom_plan(statement, []))
    assert {name: fault for name, fault in found.items() if fault} == {}
