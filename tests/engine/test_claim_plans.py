"""The claim and the finish keep their plans whatever the planner's statistics say (PostgreSQL).

Each test builds the jobs table in one state the statistics get wrong, as a temporary table of
the same name, columns and indexes (``pg_temp`` comes first in the search path, so the
statements run against it unchanged, and autovacuum never analyzes a temporary table), then
reads the plans PostgreSQL makes for the statements the worker runs, for claim sizes from 1 to
1,000: the plan made for the call's values and the generic plan of the prepared statement.

A good claim reads the partial ready index in order and stops after ``n`` rows: no sort and no
bitmap scan over every ready row, no sequential scan; the rows it updates are found by primary
key. A good finish finds its batch by primary key.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from django_jobs.core.contract import ClaimKey
from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.states import READY_STATES
from django_jobs.engine import engine_for
from django_jobs.engine.postgres import engine as postgres
from django_jobs.engine.postgres import statements
from django_jobs.models import Job

pytestmark = pytest.mark.django_db

READY_INDEXES = {"django_jobs_ready_any_idx", "django_jobs_ready_idx"}
SCANS = ("Index Scan", "Index Only Scan")
SIZES = [1, 10, 100, 1000]
# The queues the jobs are spread over, in turn.
QUEUES = ["default", "mail", "sms"]
# (queues, exclude_queues) as a worker is started: all queues, --queues of one, two and three
# queues, --exclude-queues, and both
SELECTIONS = [(None, ()), (["default"], ()), (["default", "mail"], ()), (QUEUES, ()),
              (None, ["other"]), (["default", "mail"], ["sms"])]
# The limited claim's candidates are selected by the ORM with ``queue IN (...)``, checked for
# the selections of at most one queue.
LIMITED_SELECTIONS = [(queues, excluded) for queues, excluded in SELECTIONS
                      if queues is None or len(queues) == 1]
# A worker of two or more queues claims without a key (``worker/producer.py``).
ONE_WALK_SELECTIONS = [(queues, excluded) for queues, excluded in SELECTIONS
                       if queues is None or len(queues) == 1]
# Large enough that after an ANALYZE of a small table a ready index, read from its start,
# looks cheaper than the primary key for finding one row.
BURST = 100_000


def add(count: int, status: str, age: str = "1 second", prefix: str = "j-p",
        shelved: bool = False) -> None:
    """Insert ``count`` jobs in ``status`` whose run_at is ``age`` ago, spread over
    ``QUEUES`` in turn; ``shelved``: on prune days, a week of them from a week on (finished
    jobs as the engine writes them), else on the open shelf."""
    with connection.cursor() as cursor:
        cursor.execute(
            """INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue,
                   run_at, attempt, max_attempts, crashes, created_at, updated_at, worker_id,
                   cancel_requested, callback_url, has_dependents, shelf)
               SELECT %s || lpad(to_hex(g), 19, '0'), 'echo', '{}', %s, 0,
                   (%s::text[])[g %% %s + 1], now() - %s::interval, 0, 3, 0, now(), now(), '',
                   false, '', false,
                   CASE WHEN %s THEN CURRENT_DATE + 7 + g %% 7 ELSE DATE '1000-01-01' END
               FROM generate_series(1, %s) AS g""",
            [prefix, status, QUEUES, len(QUEUES), age, shelved, count],
        )


def analyze() -> None:
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE django_jobs_job")


def never_analyzed() -> None:
    add(BURST, "pending")


def burst_after_analyzed_empty() -> None:
    analyze()
    add(BURST, "pending")


def burst_after_analyzed_small() -> None:
    add(200, "completed", "1 hour", prefix="j-h")
    analyze()
    add(BURST, "pending")


def finished_behind_ready() -> None:
    """Many finished rows behind fewer ready ones, never analyzed (``history`` for the CI;
    ``benchmarks/claim_plans.py`` measures ten million behind a hundred thousand)."""
    add(200_000, "completed", "1 day", prefix="j-h")
    add(5_000, "pending")


def finished_behind_ready_analyzed() -> None:
    finished_behind_ready()
    analyze()


def shelved_behind_ready_analyzed() -> None:
    """The finished rows on their prune days: the open shelf is then as rare in the statistics
    as the ready states are."""
    add(200_000, "completed", "1 day", prefix="j-h", shelved=True)
    add(5_000, "pending")
    analyze()


STATES = [never_analyzed, burst_after_analyzed_empty, burst_after_analyzed_small,
          finished_behind_ready, finished_behind_ready_analyzed, shelved_behind_ready_analyzed]


def nodes(plan: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield plan
    for child in plan.get("Plans", ()):
        yield from nodes(child)


def custom_plan(sql: str, params: list[Any]) -> dict[str, Any]:
    """The plan made for these values (Django's cursor writes them into the statement)."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT JSON) {sql}", params)
        return _json(cursor.fetchone()[0])


def generic_plan(sql: str, params: list[Any]) -> dict[str, Any]:
    """The plan of the statement prepared once, as the worker's connection keeps it."""
    numbered = iter(range(1, len(params) + 1))
    prepared = re.sub("%s", lambda _: f"${next(numbered)}", sql).replace("%", "%%")
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE plan_probe AS {prepared}")
        try:
            cursor.execute(f"EXPLAIN (FORMAT JSON) EXECUTE plan_probe"
                           f"({', '.join(['%s'] * len(params))})", params)
            return _json(cursor.fetchone()[0])
        finally:
            cursor.execute("DEALLOCATE plan_probe")
            cursor.execute("RESET plan_cache_mode")


def _json(value: Any) -> dict[str, Any]:
    return (json.loads(value) if isinstance(value, str) else value)[0]["Plan"]


def claim_sql(size: int, queues: list[str] | None, excluded: list[str],
              after: ClaimKey | None = None) -> tuple[str, list]:
    now = timezone.now()
    values = {"lease_token": uuid.uuid4(), "leased_until": now, "worker_id": "w",
              "started_at": now, "updated_at": now}
    text, params, _ = postgres.claim_statement(
        Job, values=values, ready_states=READY_STATES, now=now, queues=queues,
        exclude_queues=excluded, limit=size, after=after,
    )
    return text, params


def claim_faults(plan: dict[str, Any], queues: int = 1) -> list[str]:
    """What is wrong with a claim's plan; empty if it is the good one. A claim from two or more
    queues must merge one walk per queue (a Merge Append: no sort of what the walks read)."""
    faults = []
    walks = [n for n in nodes(plan)
             if n["Node Type"] in SCANS and n["Index Name"] in READY_INDEXES]
    if not walks:
        faults.append("no ordered scan of a ready index")
    if queues > 1 and (len(walks) != queues
                       or not any(n["Node Type"] == "Merge Append" for n in nodes(plan))):
        faults.append(f"not a merge of {queues} walks")
    for lock in (n for n in nodes(plan) if n["Node Type"] == "LockRows" and queues > 1):
        found = [n.get("Index Name") for n in nodes(lock) if n is not lock]
        if found[:1] != ["django_jobs_job_pkey"]:
            faults.append(f"row locked through {found}")  # one row at a time, by its key
    for node in nodes(plan):
        kind, index = node["Node Type"], node.get("Index Name")
        if kind in ("Sort", "Incremental Sort", "Seq Scan", "Hash Join", "Merge Join"):
            faults.append(kind)
        if kind == "Bitmap Index Scan" and index != "django_jobs_job_pkey":
            faults.append(f"bitmap scan of {index}")
        if kind in SCANS and index not in READY_INDEXES | {"django_jobs_job_pkey"}:
            faults.append(f"scan of {index}")
    return faults


@pytest.mark.parametrize("state", STATES, ids=lambda state: state.__name__)
def test_the_claim_walks_the_ready_index_in_order(jobs_table, state):
    state()
    faults = {}
    for size in SIZES:
        for queues, excluded in SELECTIONS:
            sql, params = claim_sql(size, queues, excluded)
            for name, plan_of in (("custom", custom_plan), ("generic", generic_plan)):
                found = claim_faults(plan_of(sql, params), len(queues or ()) or 1)
                if found:
                    faults[f"{name} plan, n={size}, queues={queues}, exclude={excluded}"] = found
    assert faults == {}


@pytest.mark.parametrize("state", STATES, ids=lambda state: state.__name__)
def test_a_claim_after_a_key_starts_its_walk_of_the_ready_index_at_the_key(jobs_table, state):
    """The key's priority and its (run_at, id) bound the index scan itself (its Index Cond),
    so the walk does not pass the entries before the key (worker/producer.py)."""
    state()
    key = ClaimKey(0, timezone.now() - timezone.timedelta(minutes=1), 5)
    faults = {}
    for size in SIZES:
        for queues, excluded in ONE_WALK_SELECTIONS:
            sql, params = claim_sql(size, queues, excluded, after=key)
            for name, plan_of in (("custom", custom_plan), ("generic", generic_plan)):
                plan = plan_of(sql, params)
                found = claim_faults(plan, len(queues or ()) or 1)
                walks = [n for n in nodes(plan)
                         if n["Node Type"] in SCANS and n["Index Name"] in READY_INDEXES]
                found += [f"walk bounded by {walk.get('Index Cond')}" for walk in walks
                          if "ROW(run_at, id) >" not in walk.get("Index Cond", "")]
                if found:
                    faults[f"{name} plan, n={size}, queues={queues}, exclude={excluded}"] = found
    assert faults == {}


@pytest.mark.parametrize("state", STATES, ids=lambda state: state.__name__)
def test_the_finish_finds_its_batch_by_primary_key(jobs_table, state):
    state()
    token = uuid.uuid4()
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE django_jobs_job SET status = 'processing', lease_token = %s, attempt = 1 "
            "WHERE id IN (SELECT id FROM django_jobs_job WHERE status = 'pending' "
            "ORDER BY id LIMIT 10) RETURNING id", [token])
        ids = [row[0] for row in cursor.fetchall()]
    now = timezone.now()
    outcomes = [AttemptOutcome(job=Job(id=i, lease_token=token, attempt=1, status="processing"),
                               kind="completed", started_at=now, finished_at=now) for i in ids]
    fields = [engine_for(Job.objects.db).transition(outcome, now) for outcome in outcomes]
    text = statements.finish_sql(Job)
    params = list(postgres.finish_params(outcomes, fields, now))
    # The earlier attempts of the jobs finished (their shelf moves with the job's) are found by
    # the attempts' index on job_id, never by a scan of the attempts table.
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname FROM pg_indexes WHERE tablename = "
                       "'django_jobs_jobattempt' AND indexdef LIKE '%%(job_id)'")
        (attempts_index,) = cursor.fetchone()
    for plan in (custom_plan(text, params), generic_plan(text, params)):
        for table in ("django_jobs_job", "django_jobs_jobattempt"):
            scans = [n["Node Type"] for n in nodes(plan)
                     if n.get("Relation Name") == table and "Scan" in n["Node Type"]]
            assert scans and "Seq Scan" not in scans, (table, scans)
        indexes = {n["Index Name"] for n in nodes(plan) if "Index Name" in n}
        assert indexes == {"django_jobs_job_pkey", attempts_index}


@pytest.mark.parametrize("state", [never_analyzed, burst_after_analyzed_empty],
                         ids=lambda state: state.__name__)
def test_the_limited_claim_walks_the_ready_index_in_order(jobs_table, state):
    """With concurrency or rate limits registered the claim selects its candidates through
    the ORM (``lockedrows.locked``); they are read the same way."""
    from django_jobs.engine.locked_rows import locked_sql

    state()
    faults = {}
    for size in SIZES:
        for queues, excluded in LIMITED_SELECTIONS:
            ready = Job.objects.ready(queues, timezone.now()).exclude(queue__in=excluded)
            sql, params = locked_sql(ready, size)
            found = claim_faults(custom_plan(sql, list(params)))
            if found:
                faults[f"n={size}, queues={queues}, exclude={excluded}"] = found
    assert faults == {}
