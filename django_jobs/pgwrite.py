"""PostgreSQL's write statements for the worker's hot paths: claim and finish.

Used by ``managers.py`` only: it stays the one write path, this module holds the SQL. Each
function is one statement and one round trip. What bounds a queue's throughput is commits per
second, so a batch of jobs is claimed by one statement and finished by one, and the worker runs
a finish and the next claim in one transaction (``docs/explanation-performance.md``). Other
databases take the ORM paths in ``managers.py``; the enqueue INSERTs are in ``pginsert.py``.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections
from django.db.models import JSONField
from django.db.models.base import ModelState

from .instances import plainly_built
from .outcomes import micros
from .pgcursor import run
from .unique import ALL_STATES

if TYPE_CHECKING:
    from .engine.transition import Transition
    from .models import Job
    from .outcomes import AttemptOutcome

# The outcomes arrive as one JSON array (one parameter, encoded by the C json module), one
# array per job, times as whole microseconds since the epoch and CPU time as nanoseconds:
# integers, which cost the client a fifth of what floats cost to encode. The UPDATE is fenced
# on (id, lease_token, status = processing): a worker whose lease was taken over writes
# nothing, and only the rows it did update get their attempt row, in the same statement.
FINISH_CTES = """v AS (
    SELECT (e->>0)::bigint AS id, (e->>1)::uuid AS token, e->>2 AS status,
        NULLIF(e->3, 'null') AS result, NULLIF(e->4, 'null') AS error,
        {epoch} + (e->>5)::bigint * {us} AS run_at,
        {epoch} + (e->>6)::bigint * {us} AS started_at,
        {epoch} + (e->>7)::bigint * {us} AS finished_at, (e->>8)::float8 / 1e9 AS cpu_time,
        (e->>9)::bigint AS peak_memory, (e->>10)::integer AS keep,
        'processing'::text AS held
    FROM jsonb_array_elements(%s::jsonb) AS e
), done AS (
    UPDATE {job} AS j SET
        status = v.status,
        result = CASE WHEN v.status = 'completed' THEN v.result ELSE j.result END,
        error = CASE WHEN v.status = 'completed' THEN NULL ELSE v.error END,
        run_at = COALESCE(v.run_at, j.run_at),
        finished_at = CASE WHEN v.status = 'failed' THEN j.finished_at ELSE %s END,
        updated_at = %s,
        leased_until = NULL,
        -- unique jobs: the key stays only if it guards the new state (keep_key_if)
        unique_key = CASE WHEN substr(j.unique_key, v.keep, 1) = '1' THEN j.unique_key END
    FROM v
    -- "id = ANY(ids)" lets the planner find the rows by primary key. Without it, it guesses
    -- 100 rows for jsonb_to_recordset, hash-joins and scans every index entry of processing
    -- rows, dead ones included: a scan that grows with each claim until VACUUM runs. The
    -- status is compared with v.held, not with a literal: "status = 'processing'" matched the
    -- lease index's condition, and the prepared plan then read every worker's processing rows
    -- through that index and filtered them by id (tests/test_indexes.py).
    WHERE j.id = ANY(%s::bigint[]) AND j.id = v.id AND j.lease_token = v.token
        AND j.status = v.held
    RETURNING j.id, j.attempt, j.worker_id
)"""
RECORD = """INSERT INTO {attempt} (job_id, number, worker_id, started_at, finished_at, outcome,
                       error, cpu_time, peak_memory)
SELECT done.id, done.attempt, done.worker_id, v.started_at, v.finished_at, v.status, v.error,
       v.cpu_time, v.peak_memory
FROM done JOIN v ON v.id = done.id
RETURNING job_id"""
FINISH = f"WITH {FINISH_CTES}\n{RECORD}"


# The claim, written out rather than compiled by the ORM on every call (compiling it cost more
# than running it). It selects exactly what ``JobQuerySet.ready()`` selects, in its order
# (tests/test_write_path.py); ``unique_key`` stays only if it guards processing (keep_key_if).
# The states, the key's position and the size are in the text, not parameters, so the prepared
# statement is planned once: with the states as parameters the generic plan cannot use the
# partial index, with the size as one each call was planned anew (~200 us a batch).
# Its shape keeps its plan whatever the statistics say (docs/explanation-performance.md, "Plans
# that do not depend on statistics"; tests/test_claim_plans.py): with ``LIMIT (SELECT n)`` the
# planner costs a tenth of the ready rows it expects, so walking the ready index in order beats
# a bitmap scan and a sort of all of them at any estimate (``LIMIT n`` with an estimate of n or
# fewer sorted them all); ``id = ANY(ARRAY(...))`` has the UPDATE find the ids by primary key,
# not join on the subquery's estimate (a hash join over the table).
CLAIM = """UPDATE {job} SET
    status = 'processing', lease_token = %s, leased_until = %s, worker_id = %s,
    attempt = attempt + 1, started_at = %s, updated_at = %s,
    unique_key = CASE WHEN substr(unique_key, {keep}, 1) = '1' THEN unique_key END
WHERE id = ANY(ARRAY(
    SELECT id FROM {job}
    WHERE status IN ({ready}) AND run_at <= %s{queues}
    ORDER BY priority DESC, run_at, id
    LIMIT (SELECT {limit}) FOR UPDATE SKIP LOCKED
))
RETURNING {columns}"""


def claim_statement(
    model: type[Job],
    *,
    values: dict[str, Any],
    ready_states: Sequence[str],
    now: datetime,
    queues: Sequence[str] | None,
    exclude_queues: Sequence[str],
    limit: int,
    connection: Any,
) -> tuple[str, list[Any], list[Any]]:
    """The claim's SQL, its parameters, and how its rows become Jobs (``RowPlan``)."""
    sql, plan = _claim_sql(
        model, tuple(ready_states), len(queues or ()), len(exclude_queues), int(limit)
    )
    return sql, [
        values["lease_token"], values["leased_until"], values["worker_id"],
        values["started_at"], values["updated_at"], now, *(queues or ()), *exclude_queues,
    ], plan


@functools.lru_cache(maxsize=256)
def _claim_sql(
    model: type[Job], states: tuple[str, ...], queues: int, excluded: int, limit: int
) -> tuple[str, RowPlan]:
    """Built once per shape (states, how many queues, limit), not on every claim."""
    qn = _quote
    known = {"status", "lease_token", "leased_until", "worker_id", "started_at", "updated_at"}
    returned = [f for f in model._meta.concrete_fields if f.attname not in known]
    where = ""
    if queues:
        where += f" AND queue IN ({', '.join(['%s'] * queues)})"
    if excluded:
        where += f" AND NOT (queue IN ({', '.join(['%s'] * excluded)}))"
    if not all(state.isidentifier() for state in states):  # written into the SQL as literals
        raise ValueError(f"not a job state: {states!r}")
    sql = CLAIM.format(
        job=qn(model._meta.db_table),
        keep=_KEEP["processing"],
        ready=", ".join(f"'{state}'" for state in states),
        queues=where,
        limit=limit,
        columns=", ".join(qn(f.column) for f in returned),
    )
    return sql, RowPlan.of(model, returned)


def _quote(name: str) -> str:
    """PostgreSQL's quoting of a table or column name, as Django's ``quote_name``."""
    return name if name.startswith('"') and name.endswith('"') else f'"{name}"'


def claim(model: type[Job], *, using: str, **statement: Any) -> list[Job]:
    """Lock, mark and read back up to ``limit`` ready jobs, in claim order, in one statement.

    ``UPDATE ... WHERE id IN (SELECT id ... ORDER BY ... LIMIT n FOR UPDATE SKIP LOCKED)
    RETURNING ...``: concurrent claimers skip each other's locked rows instead of waiting.
    ``statement`` holds ``claim_statement``'s keyword arguments; its ``values`` are the claim's
    plain values (lease token, lease end, worker id, times).
    """
    connection = connections[using]
    sql, params, plan = claim_statement(model, connection=connection, **statement)
    rows = run(connection, sql, params)
    return _claimed_jobs(model, rows, plan, statement["values"], using, connection)


def _claimed_jobs(
    model: type[Job], rows: Sequence[Sequence[Any]], plan: RowPlan, values: dict[str, Any],
    using: str, connection: Any,
) -> list[Job]:
    """The claimed rows as Jobs, in claim order (RETURNING keeps no order)."""
    jobs = []
    if plainly_built(model):
        # What ``from_db`` gives, built with two dict updates a row: the values the claim set
        # (the same for every row), then the columns read back; then each JSON column of
        # the batch converted at once (_load_column).
        known = {name: values[name] for name in plan.known}
        columns = plan.columns
        for row in rows:
            job = model.__new__(model)
            loaded = job.__dict__
            loaded.update(known)
            loaded.update(zip(columns, row, strict=True))
            state = job._state = ModelState()
            state.adding, state.db = False, using
            jobs.append(job)
        for name, to_python in plan.json:
            _load_column(jobs, name, to_python, connection)
    else:
        for row in rows:
            loaded = list(row)
            for i, to_python in plan.converters:
                loaded[i] = to_python(loaded[i], None, connection)
            fields = [
                values[source] if source.__class__ is str else loaded[source]
                for source in plan.sources
            ]
            jobs.append(model.from_db(using, plan.names, fields))
    jobs.sort(key=lambda job: (-job.priority, job.run_at, job.id))
    return jobs


@dataclass(frozen=True, eq=False)
class RowPlan:
    """How a claimed row becomes a Job, worked out once per claim statement: every field's
    name and where its value comes from (a column of the row, or the name of a value the
    claim set), the converters of the columns, and the same by name for the direct build."""

    names: list[str]
    sources: list[Any]
    converters: list[tuple[int, Any]]
    columns: list[str]
    known: list[str]
    json: list[tuple[str, Any]]

    @classmethod
    def of(cls, model: type[Job], returned: Sequence[Any]) -> RowPlan:
        position = {f.attname: i for i, f in enumerate(returned)}
        names = [f.attname for f in model._meta.concrete_fields]
        converters = [
            (i, _loader(f)) for i, f in enumerate(returned) if hasattr(f, "from_db_value")
        ]
        columns = [f.attname for f in returned]
        return cls(
            names=names, sources=[position.get(name, name) for name in names],
            converters=converters, columns=columns,
            known=[name for name in names if name not in position],
            json=[(columns[i], to_python) for i, to_python in converters],
        )


def _loader(field: Any) -> Any:
    """The field's from_db_value; for a plain JSONField (no decoder) the same done directly."""
    if type(field).from_db_value is JSONField.from_db_value and field.decoder is None:
        return _load_json
    return field.from_db_value


def _load_column(jobs: list[Job], name: str, to_python: Any, connection: Any) -> None:
    """Convert one JSON column of a batch of claimed jobs in place (None stays None).

    With Django's plain JSONField the batch's texts are joined into one JSON array and
    decoded by one ``json.loads``: a call per job cost four times as much (a payload a job)."""
    texts = [job.__dict__[name] for job in jobs]
    present = [text for text in texts if text is not None]
    if not present:
        return
    if to_python is _load_json:
        try:
            values = iter(json.loads("[" + ",".join(present) + "]"))
        except (json.JSONDecodeError, TypeError):  # not all JSON text: one at a time
            values = iter([_load_json(text, None, connection) for text in present])
    else:
        values = iter([to_python(text, None, connection) for text in present])
    for job, text in zip(jobs, texts, strict=True):
        if text is not None:
            job.__dict__[name] = next(values)


def _load_json(value: Any, expression: Any, connection: Any) -> Any:
    """``JSONField.from_db_value`` for a column read as text, without its isinstance checks."""
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def finish(
    outcomes: Sequence[AttemptOutcome], changes: Sequence[Transition], now: datetime,
    using: str,
) -> set[int]:
    """Write each outcome with its job's transition; return the ids written."""
    written = run(connections[using], _tables(FINISH), _finish_params(outcomes, changes, now))
    return {row[0] for row in written}


# A worker's turn in one statement: write the outcomes of its finished jobs and claim the next
# ones. In autocommit that is one round trip and one commit where BEGIN, finish, claim, COMMIT
# were four, each a few tens of microseconds of client and server time. The claim cannot take
# a job the same statement finishes: all parts see one snapshot, in which those rows are still
# processing. The row with the ids written always comes back, claimed jobs or none.
TURN = """WITH {finish}, recorded AS (
{record}
), claimed AS (
{claim}
)
SELECT (SELECT array_agg(job_id) FROM recorded), claimed.*
FROM (SELECT) AS one LEFT JOIN claimed ON true"""


def finish_and_claim(
    model: type[Job],
    outcomes: Sequence[AttemptOutcome],
    changes: Sequence[Transition],
    *,
    using: str,
    **claim: Any,
) -> tuple[set[int], list[Job]]:
    """``finish`` then ``claim`` as one statement; returns the ids written and the jobs claimed.

    ``claim`` holds ``claim``'s keyword arguments. The finish's part is fenced as ``finish``
    is; the claim's is ``claim`` as it stands."""
    connection = connections[using]
    claim_sql, claim_params, plan = claim_statement(model, connection=connection, **claim)
    sql = _turn_sql(claim_sql)
    rows = run(connection, sql, [*_finish_params(outcomes, changes, claim["now"]), *claim_params])
    written = set(rows[0][0] or ())
    claimed = [row[1:] for row in rows if row[1] is not None]
    return written, _claimed_jobs(model, claimed, plan, claim["values"], using, connection)


@functools.lru_cache(maxsize=256)
def _turn_sql(claim_sql: str) -> str:
    return TURN.format(
        finish=_tables(FINISH_CTES), record=_tables(RECORD), claim=claim_sql
    )


@functools.lru_cache(maxsize=8)
def _tables(sql: str) -> str:
    """The statement with the jobs' and attempts' table names written in."""
    from .models import Job, JobAttempt

    return sql.format(job=_quote(Job._meta.db_table), attempt=_quote(JobAttempt._meta.db_table),
                      epoch="TIMESTAMPTZ 'epoch'", us="INTERVAL '1 microsecond'")


def _finish_params(
    outcomes: Sequence[AttemptOutcome], changes: Sequence[Transition], now: datetime
) -> tuple[Any, ...]:
    """The finish's parameters: the outcomes as one JSON array, the time twice, the ids."""
    last, token = None, ""  # a claim gives all its jobs one token (one object): one str()
    rows = []
    for outcome, change in zip(outcomes, changes, strict=True):
        job = outcome.job
        if job.lease_token is not last:
            last, token = job.lease_token, str(job.lease_token)
        values = change.fields
        run_at = values.get("run_at")
        rows.append((
            job.id, token, change.status, values.get("result"), values.get("error"),
            None if run_at is None else micros(run_at), outcome.started, outcome.finished,
            outcome.cpu_ns, outcome.peak_memory, _KEEP[change.status],
        ))
    # The ids as an array literal: psycopg's list dumper is Python, a join is C.
    ids = ",".join([str(row[0]) for row in rows])
    return json.dumps(rows), now, now, f"{{{ids}}}"


_KEEP = {state: position + 1 for position, state in enumerate(ALL_STATES)}
