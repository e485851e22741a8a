"""PostgreSQL's claim and finish: each one statement, one round trip, one commit per batch.

Used by ``managers.py`` only (it stays the one write path; this module holds the SQL). Run in
autocommit, each statement is its own short transaction. What bounds a queue's throughput is
commits per second, so a batch of jobs costs one commit to claim and one to finish, as in the
raw loop we measure against (``docs/performance.md``). Other databases take the ORM paths in
``managers.py``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections

if TYPE_CHECKING:
    from django.db.models import QuerySet

    from .models import Job
    from .outcomes import AttemptOutcome

CLAIM = """UPDATE {job} SET status = %s, lease_token = %s, leased_until = %s, worker_id = %s,
    attempt = attempt + 1, started_at = %s, updated_at = %s
WHERE id IN ({ready} {lock})
RETURNING {columns}"""

# The outcomes arrive as parallel arrays, one element per job. The UPDATE is fenced on
# (id, lease_token, status = processing): a worker whose lease was taken over writes nothing,
# and only the rows it did update get their attempt row, in the same statement.
FINISH = """WITH v AS (
    SELECT * FROM unnest(%s::bigint[], %s::uuid[], %s::text[], %s::jsonb[], %s::jsonb[],
                         %s::timestamptz[], %s::timestamptz[], %s::timestamptz[],
                         %s::float8[], %s::bigint[])
        AS v(id, token, status, result, error, run_at, started_at, finished_at, cpu_time,
             peak_memory)
), done AS (
    UPDATE {job} AS j SET
        status = v.status,
        result = CASE WHEN v.status = 'completed' THEN v.result ELSE j.result END,
        error = CASE WHEN v.status = 'completed' THEN NULL ELSE v.error END,
        run_at = COALESCE(v.run_at, j.run_at),
        finished_at = CASE WHEN v.status = 'failed' THEN j.finished_at ELSE %s END,
        updated_at = %s,
        leased_until = NULL
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

    ``UPDATE ... WHERE id IN (SELECT id ... ORDER BY ... LIMIT n FOR UPDATE SKIP LOCKED)
    RETURNING ...``: the subquery is the ORM's own compilation of ``ready``, so every filter
    put on it applies; concurrent claimers skip each other's locked rows instead of waiting.
    """
    model = ready.model
    connection = connections[using]
    qn = connection.ops.quote_name
    ids = ready.values("pk")[:limit]
    ready_sql, ready_params = ids.query.get_compiler(using).as_sql()
    sql = CLAIM.format(
        job=qn(model._meta.db_table),
        ready=ready_sql,
        lock=connection.ops.for_update_sql(skip_locked=True),
        columns=", ".join(qn(f.column) for f in model._meta.concrete_fields),
    )
    params = (
        values["status"], values["lease_token"], values["leased_until"], values["worker_id"],
        values["started_at"], values["updated_at"], *ready_params,
    )
    jobs = list(model._default_manager.raw(sql, params).using(using))
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
    params = (
        [o.job.pk for o in outcomes],
        [o.job.lease_token for o in outcomes],
        [f["status"] for f in fields],
        [_json(f.get("result")) for f in fields],
        [_json(f.get("error")) for f in fields],
        [f.get("run_at") for f in fields],
        [o.started_at for o in outcomes],
        [o.finished_at for o in outcomes],
        [o.cpu_time for o in outcomes],
        [o.peak_memory for o in outcomes],
        now,
        now,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return {row[0] for row in cursor.fetchall()}


def _json(value: Any) -> str | None:
    """A JSONField value as the text PostgreSQL casts to jsonb; None stays SQL NULL."""
    return None if value is None else json.dumps(value)

