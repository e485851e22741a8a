"""PostgreSQL's write statements for the hot paths: claim, finish, enqueue, enqueue_many.

Used by ``managers.py`` only: it stays the one write path, this module holds the SQL. Each
function is one statement and one round trip. What bounds a queue's throughput is commits per
second, so a batch of jobs is claimed by one statement and finished by one, and the worker runs
a finish and the next claim in one transaction (``docs/performance.md``). Other databases take
the ORM paths in ``managers.py``.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.db.models import Q
from django.db.models.expressions import RawSQL
from django.db.models.sql import UpdateQuery

from .unique import ALL_STATES

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from .models import Job
    from .outcomes import AttemptOutcome

# The outcomes arrive as one JSON array (one parameter, encoded by the C json module), one
# object per job. The UPDATE is fenced on (id, lease_token, status = processing): a worker whose
# lease was taken over writes nothing, and only the rows it did update get their attempt row,
# in the same statement.
FINISH = """WITH v AS (
    SELECT * FROM jsonb_to_recordset(%s::jsonb) AS v(
        id bigint, token uuid, status text, result jsonb, error jsonb, run_at timestamptz,
        started_at timestamptz, finished_at timestamptz, cpu_time float8, peak_memory bigint,
        keep integer)
), done AS (
    UPDATE {job} AS j SET
        status = v.status,
        result = CASE WHEN v.status = 'completed' THEN v.result ELSE j.result END,
        error = CASE WHEN v.status = 'completed' THEN NULL ELSE v.error END,
        run_at = COALESCE(v.run_at, j.run_at),
        finished_at = CASE WHEN v.status = 'failed' THEN j.finished_at ELSE %s END,
        updated_at = %s,
        leased_until = NULL,
        -- sched's unique jobs: the key stays only if it guards the new state (keep_key_if)
        unique_key = CASE WHEN substr(j.unique_key, v.keep, 1) = '1' THEN j.unique_key END
    FROM v
    WHERE j.id = v.id AND j.lease_token = v.token AND j.status = 'processing'
    RETURNING j.id, j.attempt, j.worker_id
)
INSERT INTO {attempt} (job_id, number, worker_id, started_at, finished_at, outcome, error,
                       cpu_time, peak_memory)
SELECT done.id, done.attempt, done.worker_id, v.started_at, v.finished_at, v.status, v.error,
       v.cpu_time, v.peak_memory
FROM done JOIN v ON v.id = done.id
RETURNING job_id"""


def claim(
    ready: QuerySet, limit: int, values: dict[str, Any], using: str
) -> list[Job]:
    """Lock, mark and read back up to ``limit`` jobs of ``ready`` (in claim order).

    ``UPDATE ... SET <values> WHERE id IN (SELECT id ... ORDER BY ... LIMIT n FOR UPDATE SKIP
    LOCKED) RETURNING ...``: the ORM compiles both the subquery (so every filter put on
    ``ready`` applies) and the SET clause (so ``values`` may hold expressions such as
    ``F("attempt") + 1``); concurrent claimers skip each other's locked rows instead of waiting.
    """
    model = ready.model
    connection = connections[using]
    qn = connection.ops.quote_name
    ready_sql, ready_params = ready.values("pk")[:limit].query.get_compiler(using).as_sql()
    lock = connection.ops.for_update_sql(skip_locked=True)
    update = UpdateQuery(model)
    update.add_update_values(values)
    update.add_q(Q(pk__in=RawSQL(f"{ready_sql} {lock}", ready_params)))
    update_sql, update_params = update.get_compiler(using).as_sql()
    # Values the claim set from Python are known already; only the rest is read back.
    known = {k: v for k, v in values.items() if not hasattr(v, "resolve_expression")}
    fields = model._meta.concrete_fields
    returned = [f for f in fields if f.attname not in known]
    columns = ", ".join(qn(f.column) for f in returned)
    with connection.cursor() as cursor:
        cursor.execute(f"{update_sql} RETURNING {columns}", update_params)
        rows = cursor.fetchall()
    position = {f.attname: i for i, f in enumerate(returned)}
    converters = [
        (i, f.from_db_value) for i, f in enumerate(returned) if hasattr(f, "from_db_value")
    ]
    names = [f.attname for f in fields]
    jobs = []
    for row in rows:
        loaded = list(row)
        for i, convert in converters:
            loaded[i] = convert(loaded[i], None, connection)
        jobs.append(model.from_db(using, names, [
            loaded[position[name]] if name in position else known[name] for name in names
        ]))
    jobs.sort(key=lambda job: (-job.priority, job.run_at, job.pk))
    return jobs


def finish(
    outcomes: Sequence[AttemptOutcome], fields: Sequence[dict[str, Any]], now: datetime,
    using: str,
) -> set[int]:
    """Write each outcome with its job fields (from ``_finish_fields``); return the written ids."""
    from .models import Job, JobAttempt

    connection = connections[using]
    qn = connection.ops.quote_name
    sql = FINISH.format(
        job=qn(Job._meta.db_table), attempt=qn(JobAttempt._meta.db_table)
    )
    rows = [
        {
            "id": outcome.job.pk,
            "token": str(outcome.job.lease_token),
            "status": values["status"],
            "result": values.get("result"),
            "error": values.get("error"),
            "run_at": _iso(values.get("run_at")),
            "started_at": _iso(outcome.started_at),
            "finished_at": _iso(outcome.finished_at),
            "cpu_time": outcome.cpu_time,
            "peak_memory": outcome.peak_memory,
            "keep": ALL_STATES.index(values["status"]) + 1,
        }
        for outcome, values in zip(outcomes, fields, strict=True)
    ]
    with connection.cursor() as cursor:
        cursor.execute(sql, (json.dumps(rows), now, now))
        return {row[0] for row in cursor.fetchall()}


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


# Values psycopg sends as they are: Field.get_db_prep_save would return them unchanged on
# PostgreSQL, so insert() skips its cost for them (JSON and the rest still go through it).
NATIVE = (str, int, bool, datetime)


def insert(job: Job, using: str) -> None:
    """INSERT one new job and set its pk: what ``save(force_insert=True)`` does, with the
    statement built once per database instead of compiled on every call."""
    model = type(job)
    connection = connections[using]
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    sql = _INSERT.get(using)
    if sql is None:
        qn = connection.ops.quote_name
        sql = _INSERT[using] = "INSERT INTO {} ({}) VALUES ({}) RETURNING {}".format(
            qn(model._meta.db_table),
            ", ".join(qn(f.column) for f in fields),
            ", ".join(["%s"] * len(fields)),
            qn(model._meta.pk.column),
        )
    params = []
    for field in fields:
        value = field.pre_save(job, True)
        params.append(
            value if value is None or isinstance(value, NATIVE)
            else field.get_db_prep_save(value, connection)
        )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        job.pk = cursor.fetchone()[0]
    job._state.adding = False
    job._state.db = using


_INSERT: dict[str, str] = {}


def insert_many(jobs: Sequence[Job], using: str) -> None:
    """INSERT many new jobs in one statement and set their pks (``bulk_create`` without its
    per-value compile and quoting): the rows travel as one JSON array, encoded by the C json
    module, that PostgreSQL turns into rows of the table with ``jsonb_populate_recordset``."""
    if not jobs:
        return
    model = type(jobs[0])
    connection = connections[using]
    qn = connection.ops.quote_name
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    table, columns = qn(model._meta.db_table), ", ".join(qn(f.column) for f in fields)
    sql = (
        f"INSERT INTO {table} ({columns}) SELECT {columns} "
        f"FROM jsonb_populate_recordset(NULL::{table}, %s::jsonb) "
        f"RETURNING {qn(model._meta.pk.column)}, {qn('public_id')}"
    )
    rows = [{f.column: _plain(f.pre_save(job, True)) for f in fields} for job in jobs]
    with connection.cursor() as cursor:
        cursor.execute(sql, (json.dumps(rows, allow_nan=False),))
        pks = dict((public_id, pk) for pk, public_id in cursor.fetchall())
    for job in jobs:  # matched on public_id, not on the order rows come back in
        job.pk = pks[job.public_id]
        job._state.adding = False
        job._state.db = using


def _plain(value: Any) -> Any:
    """A field value as JSON: JSON fields' values as they are, times and UUIDs as text."""
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    return value
