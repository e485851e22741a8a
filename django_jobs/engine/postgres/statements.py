"""PostgreSQL's statements for the engine's hot paths, each named: the claim (``CLAIM``), the
finish (``FINISH``), a worker's turn of both (``TURN``), and the enqueue INSERTs
(``insert_sql``, ``insert_many_sql``), run by ``engine.py``.

Table, column and state names are written into the text from the models and from ``JobStatus``
(never as bare literals); every value is a parameter. The outcomes of a finish arrive as one
JSON array of objects, turned into named, typed columns by ``jsonb_to_recordset``
(``docs/explanation-performance.md`` has the measure that chose it over ``unnest`` of arrays).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import TYPE_CHECKING

from django_jobs.core.shelves import OPEN_BEFORE, OPEN_SHELF
from django_jobs.core.states import JobStatus
from django_jobs.engine.unique_column import ALL_STATES

if TYPE_CHECKING:
    from datetime import datetime

    from django.db.models import Field

    from django_jobs.models import Job


def literal(state: str) -> str:
    """A state's name as an SQL literal; only identifiers, the members of ``JobStatus``."""
    if not state.isidentifier():
        raise ValueError(f"not a job state: {state!r}")
    return f"'{state}'"


def quote(name: str | None) -> str:
    """PostgreSQL's quoting of a table or column name, as Django's ``quote_name``."""
    if name is None:
        raise ValueError("a field without a column")
    return name if name.startswith('"') and name.endswith('"') else f'"{name}"'


# The unique key's flags, in the stored order of ``unique.ALL_STATES``: the flag of a state is
# found by its name, so the SQL needs no position from Python.
KEY_STATES = f"ARRAY[{', '.join(literal(s) for s in ALL_STATES)}]::text[]"

# The columns each outcome of a finish carries, named and typed: times as whole microseconds
# since the epoch and CPU time as nanoseconds (integers cost the client a fifth of what floats
# cost to encode); ``result`` and ``error`` as JSON, null for none.
OUTCOME_COLUMNS = (
    ("id", "bigint"), ("token", "uuid"), ("status", "text"), ("result", "jsonb"),
    ("error", "jsonb"), ("run_at", "bigint"), ("started", "bigint"), ("finished", "bigint"),
    ("cpu_ns", "bigint"), ("peak_memory", "bigint"),
)
OUTCOME_NAMES = tuple(name for name, _ in OUTCOME_COLUMNS)

# The finish, fenced on (id, lease_token, status = processing): a worker whose lease was taken
# over writes nothing, and only the rows it did update get their attempt row, in the same
# statement.
FINISH_CTES = """v AS (
    SELECT o.id, o.token, o.status, o.result, o.error,  -- JSON null reads as SQL NULL
        {epoch} + o.run_at * {us} AS run_at, {epoch} + o.started * {us} AS started_at,
        {epoch} + o.finished * {us} AS finished_at, o.cpu_ns / 1e9 AS cpu_time,
        o.peak_memory, {processing}::text AS held
    FROM jsonb_to_recordset(%s::jsonb) AS o({outcome_columns})
), done AS (
    UPDATE {job} AS j SET
        status = v.status,
        result = CASE WHEN v.status = {completed} THEN v.result ELSE j.result END,
        error = CASE WHEN v.status = {completed} THEN NULL ELSE v.error END,
        run_at = COALESCE(v.run_at, j.run_at),
        finished_at = CASE WHEN v.status = {failed} THEN j.finished_at ELSE %s END,
        -- the prune day of a job this finishes, from the same time (core/shelves.py)
        shelf = CASE v.status WHEN {completed} THEN %s::date WHEN {dead} THEN %s::date
            WHEN {canceled} THEN %s::date ELSE j.shelf END,
        updated_at = %s,
        leased_until = NULL,
        -- a job this ends keeps no cancel request (engine/transition.py)
        cancel_requested = j.cancel_requested AND v.status NOT IN ({completed}, {dead}, {canceled}),
        -- unique jobs: the key stays only if it guards the new state (unique.keep_key_if)
        unique_key = CASE WHEN substr(j.unique_key, array_position({key_states}, v.status), 1)
            = '1' THEN j.unique_key END
    FROM v
    -- "id = ANY(ids)" lets the planner find the rows by primary key. Without it, it guesses
    -- 100 rows for the recordset, hash-joins and scans every index entry of processing
    -- rows, dead ones included: a scan that grows with each claim until VACUUM runs. The
    -- status is compared with v.held, not with a literal: "status = 'processing'" matches the
    -- lease index's condition, and the prepared plan would then read every worker's processing
    -- rows through that index and filter them by id (tests/engine/test_indexes.py).
    -- The open shelf names the open partition of a partitioned table (the only one a
    -- processing row is on): the write is planned there alone.
    WHERE j.id = ANY(%s::bigint[]) AND j.id = v.id AND j.lease_token = v.token
        AND j.status = v.held AND j.shelf = {open_shelf}
    RETURNING j.id, j.attempt, j.worker_id, j.shelf
), shelved AS (
    -- the earlier attempts of the jobs finished take their shelf, found by job id on the
    -- open shelf (every attempt of an open job's: the open partition alone is planned)
    UPDATE {attempt} AS a SET shelf = done.shelf
    FROM done
    WHERE a.job_id = ANY(ARRAY(SELECT id FROM done WHERE shelf <> {open_shelf}))
        AND a.job_id = done.id AND a.shelf = {open_shelf}
)"""
RECORD = """INSERT INTO {attempt} (job_id, number, worker_id, started_at, finished_at, outcome,
                       error, cpu_time, peak_memory, shelf)
SELECT done.id, done.attempt, done.worker_id, v.started_at, v.finished_at, v.status, v.error,
       v.cpu_time, v.peak_memory, done.shelf
FROM done JOIN v ON v.id = done.id
RETURNING job_id"""
FINISH = f"WITH {FINISH_CTES}\n{RECORD}"

# The claim, written out rather than compiled by the ORM on every call (compiling it cost more
# than running it). It selects exactly what ``JobQuerySet.ready()`` selects, in its order
# (tests/engine/test_write_path.py); ``unique_key`` stays only if it guards processing
# (keep_key_if).
# The states, the key's position and the size are in the text, not parameters, so the prepared
# statement is planned once: with the states as parameters the generic plan cannot use the
# partial index, with the size as one each call was planned anew (~200 us a batch).
# Its shape keeps its plan whatever the statistics say (docs/explanation-performance.md, "Plans
# that do not depend on statistics"; tests/engine/test_claim_plans.py): with ``LIMIT (SELECT n)``
# the planner costs a tenth of the ready rows it expects, so walking the ready index in order beats
# a bitmap scan and a sort of all of them at any estimate (``LIMIT n`` with an estimate of n or
# fewer sorted them all); ``id = ANY(ARRAY(...))`` has the UPDATE find the ids by primary key,
# not join on the subquery's estimate (a hash join over the table).
CLAIM = """UPDATE {job} SET
    status = {processing}, lease_token = %s, leased_until = %s, worker_id = %s,
    attempt = attempt + 1, started_at = %s, updated_at = %s,
    unique_key = CASE WHEN substr(unique_key, array_position({key_states}, {processing}), 1)
        = '1' THEN unique_key END
WHERE id = ANY(ARRAY(
{ready}
)) AND shelf = {open_shelf}
RETURNING {columns}"""

# The ids to claim from all queues or from one: the first ``n`` rows of one ready index, in
# its order, each locked as it is read.
# Every claim names the open shelves (``core/shelves.py``: ready rows are on the open one), as
# ``shelf < OPEN_BEFORE``, the open partition's upper bound: on a table partitioned by shelf the
# claim is then planned on the open partition alone. On the plain table it is a filter on the
# rows the ready index gives, which all pass it. A range, not ``shelf = OPEN_SHELF``: with no
# statistics the planner takes an equality to keep 0.5% of the rows and a range a third, and at
# 0.5% a sort of the few ready rows it then expects looked cheaper than the walk of the ready
# index (``tests/engine/test_claim_plans.py``, ``never_analyzed``).
READY = """    SELECT id FROM {job}
    WHERE status IN ({ready}) AND shelf < {open_before} AND run_at <= %s{where}
    ORDER BY priority DESC, run_at, id
    LIMIT (SELECT {limit}) FOR UPDATE SKIP LOCKED"""

# The ids to claim from two or more queues. No index holds their rows in claim order; the
# ready index holds each queue's in order, so each queue is a branch walking its part of it
# and the outer ORDER BY merges them (a Merge Append, which reads a branch only when it needs
# that branch's next row). A locking clause would end the merge: PostgreSQL takes rows that
# come out of a lock as unordered (a locked row may have changed) and would sort all of them.
# So the branches read without locking, and each row the merge passes is locked by its own
# subquery, found by primary key: it skips a row another claimer holds and, for a row changed
# since the statement's snapshot, checks the new version is still due and in the state the
# branch read. (Checked against the ready states instead, the subquery could match a ready
# index's condition, and with statistics that count few ready rows the planner found each row
# by reading that index from its start.) The merge reads one row of each branch ahead, so a
# claim of n locks at most n rows plus one per other queue; a row locked and not taken is
# free again when the claim's transaction ends. A branch has no bound (another claimer may
# hold any number of its first rows), but is written with ``LIMIT (SELECT NULL)``, which
# reads as no limit: the planner, not knowing the value, plans the branch for a tenth of its
# rows, so it keeps the walk of the index (cheaper to start) and does not sort the branch's
# rows when the statistics say there are many.
READY_OF_QUEUES = """    SELECT id FROM (
{branches}
    ) AS ready
    WHERE EXISTS (SELECT FROM {job} AS free WHERE free.id = ready.id
        AND free.status = ready.status AND free.shelf = {open_shelf} AND free.run_at <= %s
        FOR UPDATE SKIP LOCKED)
    ORDER BY priority DESC, run_at, id
    LIMIT (SELECT {limit})"""
QUEUE_BRANCH = """    (SELECT id, priority, run_at, status FROM {job}
        WHERE status IN ({ready}) AND shelf < {open_before} AND run_at <= %s{queue}{where}
        ORDER BY priority DESC, run_at, id LIMIT (SELECT NULL::bigint))"""

# One queue's rows, for a claim from one queue or a branch of ``READY_OF_QUEUES``: the queue
# three times (three parameters). The equality makes the queue a constant, so that the part of
# ``django_jobs_ready_idx`` that holds it is in claim order. The range on the same value, its
# bounds read by subqueries (InitPlans, whose values no plan knows, custom or generic), is
# estimated at 0.5% of the rows whatever the statistics say. It is a bound of that index's walk
# and only a filter of ``django_jobs_ready_any_idx``'s, so the walk of the queue's part always
# costs less than a walk of every queue's rows that filters out the others'. With the equality
# alone, statistics that count one queue (or one with nearly every row) give it a selectivity of
# about 1, the two walks cost alike, and the generic plan took ``django_jobs_ready_any_idx``: a
# claim from an empty or small queue then read every other queue's ready rows
# (``tests/engine/test_queue_plans.py``, ``one_queue_holds_every_ready_row``).
ONE_QUEUE = (" AND queue = %s AND queue >= (SELECT %s::text)"
             " AND queue <= (SELECT %s::text)")

# A worker's turn in one statement: write the outcomes of its finished jobs and claim the next
# ones. In autocommit that is one round trip and one commit where BEGIN, finish, claim, COMMIT
# were four, each a few tens of microseconds of client and server time. The claim cannot take
# a job the same statement finishes: all parts see one snapshot, in which those rows are still
# processing. The row with the ids written always comes back, claimed jobs or none.
TURN = """WITH {finish}, recorded AS (
{record}
), claimed AS (
{claim}
){marking}
SELECT (SELECT array_agg(job_id) FROM recorded), claimed.*
FROM (SELECT) AS one LEFT JOIN claimed ON true"""

# The states and other constants every statement is written with.
NAMES = {
    "processing": literal(JobStatus.PROCESSING), "completed": literal(JobStatus.COMPLETED),
    "failed": literal(JobStatus.FAILED), "dead": literal(JobStatus.DEAD),
    "canceled": literal(JobStatus.CANCELED), "key_states": KEY_STATES,
    "open_shelf": f"DATE '{OPEN_SHELF.isoformat()}'",
    "epoch": "TIMESTAMPTZ 'epoch'", "us": "INTERVAL '1 microsecond'",
    "outcome_columns": ", ".join(f"{name} {kind}" for name, kind in OUTCOME_COLUMNS),
}


def claimed_fields(model: type[Job]) -> list[Field]:
    """The fields the claim reads back: all but those it sets from known values."""
    known = {"status", "lease_token", "leased_until", "worker_id", "started_at", "updated_at"}
    return [f for f in model._meta.concrete_fields if f.attname not in known]


def in_list(name: str, count: int) -> str:
    """``name IN (%s, ...)`` with ``count`` parameters."""
    return f"{name} IN ({', '.join(['%s'] * count)})"


# A claim from where the worker's last one ended (``ClaimRequest.after``): the rows of that
# priority after its key. With the priority an equality, the row comparison is a bound of the
# ready index's walk (on run_at, id, which follow priority in it), so the walk starts at the key
# rather than at the front of the index, where the entries of the rows claimed before stay
# while a snapshot older than their claim is open (docs/explanation-performance.md, "A claim
# under a long-open snapshot").
AFTER = " AND priority = %s AND (run_at, id) > (%s, %s)"


@functools.lru_cache(maxsize=256)
def claim_sql(
    model: type[Job], states: tuple[str, ...], queues: int, excluded: int, limit: int,
    after: bool = False,
) -> str:
    """``CLAIM`` for one shape (ready states, how many queues, limit, from a key or from the
    start), built once. Its parameters are the claim's values, then those of
    ``claim_where_params``."""
    names = {"job": quote(model._meta.db_table), "open_shelf": NAMES["open_shelf"],
             "open_before": f"DATE '{OPEN_BEFORE.isoformat()}'",
             "ready": ", ".join(literal(s) for s in states), "limit": int(limit)}
    where = f" AND NOT ({in_list('queue', excluded)})" if excluded else ""
    where += AFTER if after else ""
    if queues > 1:
        branch = QUEUE_BRANCH.format(queue=ONE_QUEUE, where=where, **names)
        ready = READY_OF_QUEUES.format(
            branches="\n    UNION ALL\n".join([branch] * queues), **names)
    else:
        ready = READY.format(where=(ONE_QUEUE if queues else "") + where, **names)
    return CLAIM.format(
        job=names["job"], ready=ready,
        columns=", ".join(quote(f.column) for f in claimed_fields(model)), **NAMES,
    )


def claim_where_params(
    now: datetime, queues: Sequence[str], excluded: Sequence[str],
    after: Sequence[object] = (),
) -> list[object]:
    """The parameters of ``claim_sql``'s selection of ready rows, in their order; ``after``,
    the key's priority, run_at and id when the claim starts after one."""
    one = [(now, queue, queue, queue, *excluded, *after) for queue in queues]  # ONE_QUEUE
    if len(queues) > 1:
        return [*(value for branch in one for value in branch), now]
    return [*one[0]] if one else [now, *excluded, *after]


@functools.lru_cache(maxsize=16)
def finish_sql(model: type[Job], part: str = FINISH) -> str:
    """``FINISH`` (or one of its parts) with the jobs' and attempts' tables written in."""
    attempt = model._meta.get_field("attempts").related_model
    return part.format(job=quote(model._meta.db_table),
                       attempt=quote(attempt._meta.db_table), **NAMES)


@functools.lru_cache(maxsize=256)
def turn_sql(model: type[Job], claim: str, marking: str = "") -> str:
    """``TURN``: the finish's parts and this claim statement, and ``marking``, CTEs that follow
    the claim's (``waiters.MARK``)."""
    return TURN.format(finish=finish_sql(model, FINISH_CTES),
                       record=finish_sql(model, RECORD), claim=claim,
                       marking=f", {marking}" if marking else "")


@functools.lru_cache(maxsize=64)
def insert_sql(model: type[Job], columns: tuple[str, ...]) -> str:
    """One job's INSERT of these (quoted) columns, returning its id."""
    return "INSERT INTO {} ({}) VALUES ({}) RETURNING {}".format(  # noqa: S608
        quote(model._meta.db_table), ", ".join(columns), ", ".join(["%s"] * len(columns)),
        quote(model._meta.pk.column),
    )


def insert_many_sql(model: type[Job], fields: Sequence[Field]) -> str:
    """Many jobs' INSERT from two JSON parameters: the values all jobs share (a record of the
    table), and an array of the values each has its own, which fill the record's columns."""
    table, columns = quote(model._meta.db_table), ", ".join(quote(f.column) for f in fields)
    return (
        f"INSERT INTO {table} ({columns}) SELECT {columns} "  # noqa: S608
        f"FROM jsonb_populate_recordset("
        f"jsonb_populate_record(NULL::{table}, %s::jsonb), %s::jsonb) "
        f"RETURNING {quote(model._meta.pk.column)}, {quote('public_id')}"
    )

