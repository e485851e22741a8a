"""The engine's verbs on PostgreSQL, one statement and one round trip each: claim, finish and
a worker's turn of both. The statements are in ``engine/sql.py``; the claimed rows become Jobs
in ``engine/pgrows.py``; the enqueue INSERTs are in ``engine/pgenqueue.py``.

Used by ``managers.py`` only, which chooses these on PostgreSQL and the ORM elsewhere. What
bounds a queue's throughput is commits per second, so a batch of jobs is claimed by one
statement and finished by one, and the worker runs a finish and the next claim as one
(``docs/explanation-performance.md``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.db import connections

from ..outcomes import micros
from ..pgcursor import run
from . import sql
from .pgrows import RowPlan, claimed_jobs

if TYPE_CHECKING:
    from ..models import Job
    from ..outcomes import AttemptOutcome
    from .transition import Transition


def claim_statement(
    model: type[Job],
    *,
    values: dict[str, Any],
    ready_states: Sequence[str],
    now: datetime,
    queues: Sequence[str] | None,
    exclude_queues: Sequence[str],
    limit: int,
) -> tuple[str, list[Any], RowPlan]:
    """The claim's SQL, its parameters, and how its rows become Jobs."""
    queues = list(dict.fromkeys(queues or ()))  # a queue named twice is read once
    shape = (model, tuple(ready_states), len(queues), len(exclude_queues), int(limit))
    return sql.claim_sql(*shape), [
        values["lease_token"], values["leased_until"], values["worker_id"],
        values["started_at"], values["updated_at"],
        *sql.claim_where_params(now, queues, exclude_queues),
    ], _row_plan(model)


def _row_plan(model: type[Job]) -> RowPlan:
    plan = _PLANS.get(model)
    if plan is None:
        plan = _PLANS[model] = RowPlan.of(model, sql.claimed_fields(model))
    return plan


_PLANS: dict[type, RowPlan] = {}


def claim(model: type[Job], *, using: str, **statement: Any) -> list[Job]:
    """Lock, mark and read back up to ``limit`` ready jobs, in claim order, in one statement.

    ``UPDATE ... WHERE id IN (SELECT id ... ORDER BY ... LIMIT n FOR UPDATE SKIP LOCKED)
    RETURNING ...``: concurrent claimers skip each other's locked rows instead of waiting.
    ``statement`` holds ``claim_statement``'s keyword arguments; its ``values`` are the claim's
    plain values (lease token, lease end, worker id, times).
    """
    connection = connections[using]
    text, params, plan = claim_statement(model, **statement)
    rows = run(connection, text, params)
    return claimed_jobs(model, rows, plan, statement["values"], using, connection)


def finish(
    model: type[Job], outcomes: Sequence[AttemptOutcome], changes: Sequence[Transition],
    now: datetime, using: str,
) -> set[int]:
    """Write each outcome with its job's transition; return the ids written."""
    params = finish_params(outcomes, changes, now)
    return {row[0] for row in run(connections[using], sql.finish_sql(model), params)}


def finish_and_claim(
    model: type[Job],
    outcomes: Sequence[AttemptOutcome],
    changes: Sequence[Transition],
    *,
    using: str,
    **claim: Any,
) -> tuple[set[int], list[Job]]:
    """``finish`` then ``claim`` as one statement (``sql.TURN``); returns the ids written and
    the jobs claimed. ``claim`` holds ``claim``'s keyword arguments."""
    connection = connections[using]
    claim_text, claim_params, plan = claim_statement(model, **claim)
    params = [*finish_params(outcomes, changes, claim["now"]), *claim_params]
    rows = run(connection, sql.turn_sql(model, claim_text), params)
    written = set(rows[0][0] or ())
    claimed = [row[1:] for row in rows if row[1] is not None]
    return written, claimed_jobs(model, claimed, plan, claim["values"], using, connection)


def finish_params(
    outcomes: Sequence[AttemptOutcome], changes: Sequence[Transition], now: datetime
) -> tuple[Any, ...]:
    """The finish's parameters: the outcomes as one JSON array of objects with the columns of
    ``sql.OUTCOME_COLUMNS`` (encoded by the C json module), the time twice, the ids."""
    last, token = None, ""  # a claim gives all its jobs one token (one object): one str()
    rows = []
    ids = []
    names = sql.OUTCOME_NAMES
    for outcome, change in zip(outcomes, changes, strict=True):
        job = outcome.job
        if job.lease_token is not last:
            last, token = job.lease_token, str(job.lease_token)
        values = change.fields
        run_at = values.get("run_at")
        rows.append(dict(zip(names, (
            job.id, token, change.status, values.get("result"), values.get("error"),
            None if run_at is None else micros(run_at), outcome.started, outcome.finished,
            outcome.cpu_ns, outcome.peak_memory,
        ), strict=True)))
        ids.append(str(job.id))
    # The ids as an array literal: psycopg's list dumper is Python, a join is C.
    return json.dumps(rows), now, now, f"{{{','.join(ids)}}}"
