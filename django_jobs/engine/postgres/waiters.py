"""Idle workers as waiters, so that an enqueue wakes one worker per ready job (migrations 0018,
0024 and 0032).

A worker whose listener hears notifications (``engine/postgres/listener.py``) claims with its
listening session's process id. A claim that takes fewer jobs than the worker has room for (the
queue ran dry) marks the worker waiting in ``django_jobs_waiter``, in the claim's own statement
(``MARK``; after a claim on the ORM's path, which limits take, in one of its own: ``MARK_AFTER``),
and says whether it still holds jobs; a claim that fills its room marks it busy. The row is
written only when the worker's state changes (waiting or busy, its queues, the queues it skips),
never per job: a job's life writes its own row and its attempt, and no dead row version here.

The enqueue's trigger tells waiters of live sessions, one per ready job, idle ones first, the
one that began waiting last first, each on its own channel, ``django_jobs_<pid>``, and writes
nothing: it locks the waiters it tells until it commits (``FOR UPDATE SKIP LOCKED``), so that two
enqueues at once tell two waiters. Enqueues one after the other tell the same waiter until its
claim leaves it busy; it claims as many jobs as it was told of, up to its room. With fewer
waiters than jobs it tells the other workers of the queue, waiting ones first (another enqueue
holds them), then busy ones (they claim at their next turn), and with fewer workers than jobs
every worker of the queue on ``django_jobs``.

Nothing here waits on a lock: the row of a waiter an uncommitted enqueue holds is skipped
(``SKIP LOCKED``): another enqueue tells another waiter, and a claim that would mark it leaves it
as it is until the worker's next claim. The row of a worker killed stays, but is passed over
once its session has ended, and the workers' heartbeats remove it (``FORGET_GONE``).

A worker told of a job may not act on it: its process is frozen (SIGSTOP, a long pause of the
host or of its memory), it died between the enqueue's commit and its claim, it had no room left
(told again before its claim marked it busy), or the notification was lost. So waiting workers
look for ready jobs of their queues that came due more than
``LOOK_AFTER`` seconds ago by the database's clock and that no claim has taken (``overlooked``,
a read of the ready index, no write); a worker's next claim takes what its look found
(``engine/postgres/listener.py``). Each look also says how many workers of the same queues have
waited longer than this one (its rank): the two that waited longest, which enqueues tell last,
look every ``LOOK_EVERY`` seconds, the one of rank r every r times that, so that N idle workers
look about 2 + 2 ln N times a second between them, not 2N. Whatever kept the job from its worker,
another worker with room starts it within about ``LOOK_AFTER + LOOK_EVERY`` seconds while one of
the two is healthy; two that find it claim with ``SKIP LOCKED``, and one of them takes it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Protocol

from django_jobs.core.shelves import OPEN_BEFORE
from django_jobs.core.states import READY_STATES

if TYPE_CHECKING:
    from collections.abc import Sequence

    import psycopg
    from psycopg.rows import TupleRow

    from django_jobs.core.contract import Waiting



class CursorLike(Protocol):
    """A DB-API cursor (Django's, over the worker's own connection)."""

    def execute(self, sql: str, params: Any = ...) -> Any: ...

    def fetchone(self) -> Any: ...


TABLE = "django_jobs_waiter"

# A ready job not claimed this long after it came due (seconds, by the database's clock) was
# not acted on by the worker its enqueue woke, and waiting workers take it; they look this often.
LOOK_AFTER = 0.25
LOOK_EVERY = 0.5
# At most this many overlooked jobs are counted by one look (its next claim's allowance).
LOOK_LIMIT = 100
BROADCAST = "django_jobs"


def channel(pid: int) -> str:
    """The channel on which the session ``pid`` is told of jobs for its worker."""
    return f"{BROADCAST}_{int(pid)}"


# Joined to a claim (``claimed``, a CTE of the claim's rows): the worker's row (parameters: pid,
# queues or NULL for all, the queues it skips, its room, whether it holds jobs) is made waiting
# if the claim took fewer jobs than the worker has room for and busy otherwise; written only when
# that or its queues change. ``holding`` is written with it: whether the worker held jobs when
# it began waiting (a worker with room for several would otherwise write it twice per job).
MARK = """me AS (
    SELECT %s::integer AS pid, %s::text[] AS queues, %s::text[] AS skips,
        (SELECT count(*) FROM claimed) < %s::integer AS short,
        %s::boolean OR EXISTS (SELECT FROM claimed) AS holding
), marked AS (
    UPDATE {table} AS w SET
        waiting = CASE WHEN me.short THEN COALESCE(w.waiting, statement_timestamp()) END,
        holding = me.holding, queues = me.queues, skips = me.skips
    FROM me
    WHERE w.pid = (
        SELECT s.pid FROM {table} AS s, me
        WHERE s.pid = me.pid AND ((s.waiting IS NULL) = me.short
            OR s.queues IS DISTINCT FROM me.queues OR s.skips IS DISTINCT FROM me.skips)
        FOR UPDATE OF s SKIP LOCKED)
    RETURNING w.pid
), joined AS (
    INSERT INTO {table} (pid, queues, skips, waiting, holding)
    SELECT me.pid, me.queues, me.skips, statement_timestamp(), me.holding FROM me
    WHERE me.short AND NOT EXISTS (SELECT FROM {table} AS s WHERE s.pid = me.pid)
    RETURNING pid
)"""


MARKING = MARK.format(table=TABLE)


@functools.lru_cache(maxsize=256)
def claim_marking(claim: str) -> str:
    """A claim statement that also marks its worker waiting or busy; its rows are the claim's."""
    return f"WITH claimed AS (\n{claim}\n), {MARKING}\nSELECT * FROM claimed"


# ``MARK`` alone, after a claim made on the ORM's path (a feature admits its candidates): the
# claim's rows stand in as a count (parameter: the jobs it took), then ``MARK``'s parameters. A
# data-modifying CTE runs whether or not the query reads it.
MARK_AFTER = f"WITH claimed AS (SELECT generate_series(1, %s::integer)), {MARKING}\nSELECT 1"


def mark_params(waiting: Waiting, queues: Sequence[str] | None, skips: Sequence[str]
                ) -> list[object]:
    """``MARK``'s parameters: the listening session, the worker's queues (None: every queue),
    the queues it passes over (paused), its room and whether it holds jobs."""
    return [waiting.pid, list(queues) if queues else None, list(skips), waiting.room,
            waiting.holding]


# A worker's row, unless an enqueue holds it (then it stays until the heartbeats of the
# workers remove it once its session is gone: ``FORGET_GONE``).
LEAVE = """DELETE FROM django_jobs_waiter WHERE pid = (
    SELECT pid FROM django_jobs_waiter WHERE pid = %s FOR UPDATE SKIP LOCKED)"""

# The rows of sessions that are gone (a worker killed, a listener reconnected), unless an
# enqueue holds them.
FORGET_GONE = """DELETE FROM django_jobs_waiter WHERE pid IN (
    SELECT pid FROM django_jobs_waiter AS w
    WHERE NOT EXISTS (SELECT FROM pg_stat_activity AS a WHERE a.pid = w.pid)
    FOR UPDATE SKIP LOCKED)"""


# Processes waiting for jobs to end (``Job.wait``) listen on FINISHED_CHANNEL from a session
# named WAIT_LISTENER (``engine/postgres/finish_notes.py``). A worker's heartbeat removes the
# rows of sessions that are gone and reads whether any such listener is connected, in one
# statement (FORGET_GONE_AND_LOOK); ``result_waiters`` keeps the answer by database, and the
# worker's finishes notify (FINISHED_NOTIFY, the payload the jobs' ids) only while it is True.
# The notification's own EXISTS stops it as soon as the last listener has gone.
FINISHED_CHANNEL = "django_jobs_finished"
WAIT_LISTENER = "django_jobs_waiters"
FORGET_GONE_AND_LOOK = (
    f"WITH gone AS ({FORGET_GONE} RETURNING pid) "  # noqa: S608 constant text, no input
    "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE application_name = %s)")
FINISHED_NOTIFY = ("SELECT pg_notify(%s, %s) WHERE EXISTS "
                   "(SELECT FROM pg_stat_activity WHERE application_name = %s)")
result_waiters: dict[str, bool] = {}


def leave(conn: psycopg.Connection[TupleRow], pid: int) -> None:
    """Remove the row of the listening session ``pid`` (a worker stopping, a listener leaving)."""
    conn.execute(LEAVE, (pid,))


def forget_gone(conn: psycopg.Connection[TupleRow]) -> None:
    """Remove the rows of sessions that no longer exist."""
    conn.execute(FORGET_GONE)


# The ready jobs of a worker's queues (parameters: its queues or NULL for all, the queues it
# passes over) due for more than ``LOOK_AFTER`` seconds, counted up to ``LOOK_LIMIT``, on the
# open shelf as a claim reads them; and the worker's rank (parameter: its listening session):
# how many waiting workers of the same queues began waiting before it.
LOOKED_FOR = """SELECT (SELECT count(*) FROM (
    SELECT FROM django_jobs_job
    WHERE status IN ({states}) AND shelf < DATE '{open_before}'
        AND run_at <= statement_timestamp() - INTERVAL '{after} seconds'
        AND (%s::text[] IS NULL OR queue = ANY(%s::text[])) AND queue <> ALL(%s::text[])
    LIMIT {limit}) AS overlooked), (SELECT count(*) FROM {table} AS me, {table} AS o
    WHERE me.pid = %s AND o.waiting < me.waiting AND o.queues IS NOT DISTINCT FROM me.queues)"""
OVERLOOKED = LOOKED_FOR.format(
    states=", ".join(f"'{state}'" for state in READY_STATES), table=TABLE,
    open_before=OPEN_BEFORE.isoformat(), after=LOOK_AFTER, limit=LOOK_LIMIT)


def overlooked(conn: CursorLike, pid: int, queues: Sequence[str] | None, skips: Sequence[str]
               ) -> tuple[int, int]:
    """How many ready jobs of these queues (None: every queue) but ``skips`` came due more
    than ``LOOK_AFTER`` seconds ago and are still unclaimed, and the rank of the waiting worker
    of listening session ``pid`` (see the module's docstring)."""
    names = list(queues) if queues else None
    conn.execute(OVERLOOKED, [names, names, list(skips), pid])
    row = conn.fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def look_every(rank: int) -> float:
    """Seconds between the looks of the waiting worker of ``rank`` (0: it waited longest)."""
    return LOOK_EVERY * max(1, rank)
