"""The engine on PostgreSQL (``PostgresEngine``): the enqueue INSERTs, the claim, the finish
and a worker's turn of both as hand-written statements, one round trip each; every other verb
is the ORM's (``engine/verbs.py``). The statements are in ``engine/postgres/statements.py``; the
claimed rows become Jobs in ``engine/postgres/rows.py``; the enqueue INSERTs are in
``engine/postgres/enqueue.py``.

What bounds a queue's throughput is commits per second, so a batch of jobs is claimed by one
statement and finished by one, and the worker runs a finish and the next claim as one
(``docs/explanation-performance.md``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import replace
from datetime import datetime
from typing import TYPE_CHECKING, NotRequired, TypedDict, Unpack

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction

from django_jobs.core import clock
from django_jobs.core.outcomes import micros
from django_jobs.core.states import CANCELED, COMPLETED, DEAD, READY_STATES, Outcome
from django_jobs.engine import finish_counts, hooks
from django_jobs.engine.locked_rows import locked_in_order
from django_jobs.engine.moved_claims import apart_if_moved, claim_again_if_moved
from django_jobs.engine.moved_rows import once_more_if_moved
from django_jobs.engine.portable import RowLockEngine
from django_jobs.engine.postgres import prune, waiters
from django_jobs.engine.postgres import statements as sql
from django_jobs.engine.postgres.cursor import run
from django_jobs.engine.postgres.enqueue import PostgresInserts
from django_jobs.engine.postgres.rows import RowPlan, claimed_jobs
from django_jobs.engine.shelving import shelf_for
from django_jobs.engine.transition import undone_on_error
from django_jobs.engine.writes import ClaimValues, claim_values, written
from django_jobs.exceptions import ClaimConflict

if TYPE_CHECKING:
    from django_jobs.core.contract import ClaimKey, ClaimRequest
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.engine.transition import Transition
    from django_jobs.engine.waiting import Wakeups
    from django_jobs.models import Job
    from django_jobs.models.managers import JobQuerySet


logger = logging.getLogger("django_jobs.worker")

# pg_notify's payload must stay under 8000 bytes: a longer list of ids is sent empty (any job).
PAYLOAD_LIMIT = 7000

# The first half of the advisory locks that hold unique keys (``hold_key``), the second being
# the key's hash: "jobs" in ASCII, apart from other applications' locks of one bigint.
KEY_LOCKS = 0x6A6F6273


class PostgresEngine(PostgresInserts, RowLockEngine):
    """The ORM's verbs, with the hot ones as single statements. A claim that a feature admits
    (concurrency and rate limits need the locked candidates first) and a finish with a snooze
    take the ORM's path; such a claim then marks its worker waiting or busy in a statement of
    its own, in the claim's transaction when it is a turn's. The enqueue's INSERTs are
    ``PostgresInserts``' (``engine/postgres/enqueue.py``)."""

    def lock_candidates(self, ready: JobQuerySet, limit: int) -> list[Job]:
        """The ready rows read as the plain claim reads them, in the ready index's order
        (``lockedrows.locked_in_order``)."""
        return locked_in_order(ready, limit)

    @claim_again_if_moved
    def claim(self, request: ClaimRequest) -> list[Job]:
        """One statement; with ``request.after``, a second from the ready index's start if
        the first found nothing after the key (``ClaimRequest``)."""
        if request.limit < 1:
            return []
        if hooks.limits_claims():  # the ORM's claim, admitted; then the worker marked
            jobs = super().claim(request)
            waiter = _waiter(request)
            if waiter is not None:
                run(connections[self.db], waiters.MARK_AFTER, [len(jobs), *waiter])
            return jobs
        now = clock.now(self.db)
        jobs = claim(
            self.jobs.model, ready_states=READY_STATES, now=now, queues=request.queues,
            exclude_queues=request.exclude_queues, limit=request.limit, using=self.db,
            values=claim_values(
                request.worker_id, now, request.lease_seconds, request.lease_token),
            waiter=_waiter(request), after=request.after,
        )
        if jobs or request.after is None:
            return jobs
        return self.claim(replace(request, after=None))

    @once_more_if_moved
    def finish(self, outcomes: Sequence[AttemptOutcome]) -> list[AttemptOutcome]:
        """The fenced updates and the attempt rows of a batch in one statement, in the
        worker's transaction if it has one; a snooze takes the ORM's path."""
        if any(outcome.kind == Outcome.SNOOZED for outcome in outcomes):
            return super().finish(outcomes)
        if not outcomes:
            return []
        now = clock.now(self.db)
        changes = [self.transition(outcome, now) for outcome in outcomes]
        # the waits are read before run_at changes
        waited = finish_counts.waits(outcomes) if finish_counts.enabled() else None
        with undone_on_error() as applying, transaction.atomic(using=self.db, savepoint=False):
            mine = finish(self.jobs.model, outcomes, changes, now, self.db)
            done = written(outcomes, changes, mine, applying)
            if waited is not None:  # the finished jobs counted (engine/finish_counts.py)
                finish_counts.record(self.db, done, now, waited)
            hooks.after_finish(self.jobs, done, now)  # callbacks, follow-ups, dependents
        announce(self.db, done)  # to Job.wait's listeners, if any
        return done

    @apart_if_moved
    def finish_and_claim(
        self, outcomes: Sequence[AttemptOutcome], request: ClaimRequest
    ) -> tuple[list[AttemptOutcome], list[Job]]:
        """One statement in its own transaction when no outcome needs more than its own row
        and attempt row written (no callback, dependents, follow-ups or snooze) and no limits
        are registered (a limit of 0 claims nothing in it); otherwise ``finish`` and ``claim``
        in one transaction."""
        if not ((request.limit > 0 or outcomes) and self._plain_turn(outcomes)):
            return super().finish_and_claim(outcomes, request)
        if not outcomes:  # one statement: no BEGIN and COMMIT around it
            return [], self.claim(request)
        now = clock.now(self.db)
        changes = [self.transition(outcome, now) for outcome in outcomes]
        # the waits are read before run_at changes
        waited = finish_counts.waits(outcomes) if finish_counts.enabled() else None
        mine, jobs = finish_and_claim(
            self.jobs.model, outcomes, changes, ready_states=READY_STATES, now=now,
            queues=request.queues, exclude_queues=request.exclude_queues, limit=request.limit,
            using=self.db, values=claim_values(
                request.worker_id, now, request.lease_seconds, request.lease_token),
            waiter=_waiter(request), after=request.after,
        )
        done = written(outcomes, changes, mine)
        if waited is not None:  # the finished jobs counted (engine/finish_counts.py)
            finish_counts.record(self.db, done, now, waited)
        if not jobs and request.after is not None and request.limit > 0:
            try:
                jobs = self.claim(replace(request, after=None))  # nothing after the key
            except ClaimConflict as conflict:
                conflict.written = done  # committed with the turn's statement
                raise
        if done:
            announce(self.db, done)  # to Job.wait's listeners, if any
        return done, jobs

    def hold_key(self, key: str) -> bool:
        """A transaction-level advisory lock on the key's hash (``KEY_LOCKS``, the hash of the
        stored key): on a table partitioned by shelf, a key that guards a finished state stays
        on its job's row in a day partition, where the open partition's unique index does not
        see it, so the insert of such a key looks for its holder on the whole table under this
        lock instead. Keys of other hashes are not held up; two keys of one hash wait for each
        other, no more. In the caller's transaction: outside one the lock would end with the
        statement."""
        connection = connections[self.db]
        if not connection.in_atomic_block:
            raise RuntimeError("hold_key needs the caller's transaction")
        run(connection, "SELECT pg_advisory_xact_lock(%s, hashtext(%s))", [KEY_LOCKS, key])
        return True

    def lock_depended_on(self, ids: list[int]) -> None:
        """``FOR KEY SHARE``: only a delete (or a finish that moves the row to its day
        partition) waits for it; a prune batch's ``FOR UPDATE SKIP LOCKED`` passes over it."""
        meta = self.jobs.model._meta
        with connections[self.db].cursor() as cursor:
            cursor.execute(f"SELECT 1 FROM {sql.quote(meta.db_table)} "  # noqa: S608 (names from the model)
                           f"WHERE {sql.quote(meta.pk.column)} = ANY(%s) "
                           f"ORDER BY {sql.quote(meta.pk.column)} FOR KEY SHARE", [ids])

    def wakeups(self) -> Wakeups:
        """The waiters of this process on this database, woken by one listener
        (``engine/postgres/finish_notes.py``)."""
        if self._wakeups is None:
            from django_jobs.engine.postgres.finish_notes import NotifiedWakeups
            self._wakeups = NotifiedWakeups(self.db)
        return self._wakeups

    def delete_batch(self, jobs: JobQuerySet, limit: int) -> int:
        """The batch, its attempts and what its other relations' ``on_delete`` asks, in one
        statement (``engine/postgres/prune.py``) where that does what Django's delete would."""
        deleted = prune.delete_batch(jobs, limit)
        return super().delete_batch(jobs, limit) if deleted is None else deleted

    @staticmethod
    def _plain_turn(outcomes: Sequence[AttemptOutcome]) -> bool:
        """True if a turn may be the one statement (see ``finish_and_claim``)."""
        if hooks.limits_claims():
            return False
        for outcome in outcomes:  # a loop, not any(): this runs for every job a worker ends
            if outcome.kind == Outcome.SNOOZED or hooks.joins_finish(outcome.job):
                return False
        return True


def _waiter(request: ClaimRequest) -> list[object] | None:
    """The parameters that register the claiming worker as waiting or busy, if it listens (a
    turn that claims nothing still says whether the worker holds jobs)."""
    if request.waiter is None:
        return None
    return waiters.mark_params(request.waiter, request.queues, request.exclude_queues)


class ClaimStatement(TypedDict):
    """``claim_statement``'s keyword arguments: the claim's values (``claim_values``) and what
    it reads (the ready states, the time, the queues it takes and those it passes over)."""

    values: ClaimValues
    ready_states: Sequence[str]
    now: datetime
    queues: Sequence[str] | None
    exclude_queues: Sequence[str]
    limit: int
    after: NotRequired[ClaimKey | None]


def announce(using: str, done: Sequence[AttemptOutcome]) -> None:
    """Tell the processes waiting for jobs to end (``Job.wait``,
    ``engine/postgres/finish_notes.py``) that the jobs of ``done`` were finished: only while
    the worker's last heartbeat saw one listening (``waiters.result_waiters``), so where nobody
    waits a finish sends nothing more. After the finish's commit, or in the caller's
    transaction (in a savepoint: a failure here never undoes the finish). A failure is logged
    and passed over: the waiters' own reads find the jobs' ends."""
    if not done or not waiters.result_waiters.get(using):
        return
    payload = ",".join(str(outcome.job.pk) for outcome in done)
    connection = connections[using]
    try:
        with transaction.atomic(using=using) if connection.in_atomic_block else nullcontext():
            with connection.cursor() as cursor:
                cursor.execute(waiters.FINISHED_NOTIFY, [
                    waiters.FINISHED_CHANNEL, payload if len(payload) <= PAYLOAD_LIMIT else "",
                    waiters.WAIT_LISTENER])
    except DatabaseError:
        logger.debug("could not tell the waiters of finished jobs", exc_info=True)


def claim_statement(model: type[Job], **claim: Unpack[ClaimStatement]
                    ) -> tuple[str, list[object], RowPlan]:
    """The claim's SQL, its parameters, and how its rows become Jobs."""
    values, exclude_queues = claim["values"], claim["exclude_queues"]
    queues = list(dict.fromkeys(claim["queues"] or ()))  # a queue named twice is read once
    after = claim.get("after")
    shape = (model, tuple(claim["ready_states"]), len(queues), len(exclude_queues),
             int(claim["limit"]), after is not None)
    return sql.claim_sql(*shape), [
        values["lease_token"], values["leased_until"], values["worker_id"],
        values["started_at"], values["updated_at"],
        *sql.claim_where_params(claim["now"], queues, exclude_queues, after or ()),
    ], _row_plan(model)


def _row_plan(model: type[Job]) -> RowPlan:
    plan = _PLANS.get(model)
    if plan is None:
        plan = _PLANS[model] = RowPlan.of(model, sql.claimed_fields(model))
    return plan


_PLANS: dict[type, RowPlan] = {}


def claim(model: type[Job], *, using: str, waiter: list[object] | None = None,
          **statement: Unpack[ClaimStatement]) -> list[Job]:
    """Lock, mark and read back up to ``limit`` ready jobs, in claim order, in one statement.

    ``UPDATE ... WHERE id IN (SELECT id ... ORDER BY ... LIMIT n FOR UPDATE SKIP LOCKED)
    RETURNING ...``: concurrent claimers skip each other's locked rows instead of waiting.
    ``statement`` holds ``claim_statement``'s keyword arguments; its ``values`` are the claim's
    plain values (lease token, lease end, worker id, times). With ``waiter`` (``_waiter``) the
    same statement registers the worker as waiting if the claim is short, busy if it is full.
    """
    connection = connections[using]
    text, params, plan = claim_statement(model, **statement)
    if waiter is not None:
        text, params = waiters.claim_marking(text), [*params, *waiter]
    rows = run(connection, text, params)
    return claimed_jobs(model, rows, plan, statement["values"], using, connection)


def finish(
    model: type[Job], outcomes: Sequence[AttemptOutcome], changes: Sequence[Transition],
    now: datetime, using: str,
) -> set[int]:
    """Write each outcome with its job's transition; return the ids written."""
    params = finish_params(outcomes, changes, now, using)
    text = sql.finish_sql(model, sql.FINISH)
    return {row[0] for row in run(connections[using], text, params)}


def finish_and_claim(
    model: type[Job],
    outcomes: Sequence[AttemptOutcome],
    changes: Sequence[Transition],
    *,
    using: str,
    waiter: list[object] | None = None,
    **claim: Unpack[ClaimStatement],
) -> tuple[set[int], list[Job]]:
    """``finish`` then ``claim`` as one statement (``sql.TURN``); returns the ids written and
    the jobs claimed. ``claim`` holds ``claim``'s keyword arguments, ``waiter`` as ``claim``'s."""
    connection = connections[using]
    claim_text, claim_params, plan = claim_statement(model, **claim)
    params = [*finish_params(outcomes, changes, claim["now"], using), *claim_params]
    marking = ""
    if waiter is not None:
        marking, params = waiters.MARKING, [*params, *waiter]
    rows = run(connection, sql.turn_sql(model, claim_text, marking), params)
    written = set(rows[0][0] or ())
    claimed = [row[1:] for row in rows if row[1] is not None]
    return written, claimed_jobs(model, claimed, plan, claim["values"], using, connection)


def finish_params(
    outcomes: Sequence[AttemptOutcome], changes: Sequence[Transition], now: datetime,
    using: str = DEFAULT_DB_ALIAS,
) -> list[object]:
    """The finish's parameters: the outcomes as one JSON array of objects with the columns of
    ``sql.OUTCOME_COLUMNS`` (encoded by the C json module), the time, the shelves of a job
    completed, dead and canceled at that time (``core/shelves.py``), the time again, the
    ids."""
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
    params: list[object] = [
        json.dumps(rows), now, shelf_for(COMPLETED, now, using), shelf_for(DEAD, now, using),
        shelf_for(CANCELED, now, using), now, f"{{{','.join(ids)}}}",
    ]
    return params
