"""One turn of the worker's loop: write the outcomes that came in and claim more, usually in
one transaction; then free the slots of what was written, count, log and signal it.

On PostgreSQL a claim that takes fewer jobs than the worker has room for registers the worker
as waiting; until the poll is due, a waiting worker's claims take only as many jobs as the
listener heard of for it since (none: its turns write outcomes only), and the jobs its last look
found overlooked: the trigger gives each new job to one worker, and a claim of more would take
it from under that one (``engine/postgres/listener.py``, ``allowance``). A waiting worker's loop
looks for overlooked jobs while it waits (``worker/loop.py``, ``Listener.look``).

One commit per turn instead of two: commits per second are what bound a queue's throughput
(docs/explanation-performance.md). An outcome the write could not make (the database is
away: ``worker/outage.py``) waits in the outbox for a later turn; a batch the database refuses is
written outcome by outcome (``worker/isolation.py``). A write that timed out (``outage.classify``)
is an outage too, but the same statement may time out again for ever if what it writes is too big
for the database's statement timeout: so its outcomes go back to the outbox, and each write that
times out halves the outcomes the next one takes, down to one; each write that works doubles it,
until the outbox is empty again and writes take it whole. An outcome whose write times out alone
``TIMEOUTS_ALONE`` times is written as a failed attempt whose error says so (``OutcomeTimedOut``):
small to write, it spends the attempt like any error.

A turn that fails may still have committed: the connection can drop after the COMMIT reached
the server and before its reply came back (a pooler or the network cut it). The claim's lease
token is chosen here, before the statement is sent, so that such a claim is in doubt rather
than lost: its token is kept, and the next turn (or the shutdown) hands back whatever is still
held under it, instead of leaving those jobs in ``processing`` until their lease runs out.

When a burst worker (``runworker --burst``) ends: when its claim took nothing, nothing runs,
its finishes released nothing it could run, and no job it could run comes due within
``--burst-wait`` seconds (default 0: a job due later is left for other workers).

A turn writes its outcomes and claims in one transaction; on PostgreSQL the plain turn is one
statement, whose claim does not see the rows its own finish made ready, and a waiting worker's
claim takes only the jobs it was told of. So after a turn that wrote outcomes and claimed
nothing, the worker looks for jobs that its finishes made ready (``burst_released``: dependents, a
group's callback, follow-ups, each written ready at once, ``run_at`` not after ``updated_at``)
and claims them in its next turn. A retry or a snooze is written due later: it is not counted,
so whether a burst runs it does not depend on how fast the host is. A burst worker claims
whatever is ready (it is never registered as a waiter).
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from django.db.models import F, Min
from django.utils import timezone

from django_jobs.core import clock, contract, observers
from django_jobs.core.contract import ClaimKey, ClaimRequest, Waiting
from django_jobs.core.db_errors import TIMEOUT, classify
from django_jobs.core.states import READY_STATES, Outcome
from django_jobs.exceptions import ClaimConflict
from django_jobs.models import Job
from django_jobs.models.schema import jobs_database
from django_jobs.signals import job_finished
from django_jobs.worker.executor import Running
from django_jobs.worker.handoff import handoff
from django_jobs.worker.log_lines import log_end

if TYPE_CHECKING:
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models.managers import JobQuerySet
    from django_jobs.worker.state import WorkerState

logger = logging.getLogger("django_jobs.worker")

# How many writes of one outcome alone may time out before it is written as a failure
# (see the module's docstring). The outage's backoff runs between them: when nothing else is
# written meanwhile (a lock held on the table, a database slow for a moment), the tries span
# at least 7.5 s (0.5 + 1 + 2 + 4), more with the halvings before them.
TIMEOUTS_ALONE = 5


@dataclass
class Claim:
    """What a turn asks for: ``limit`` jobs (0: it writes outcomes only), the ``room`` it had
    before the listener's allowance, and what the turn's end needs to know of how it was sent."""

    limit: int
    room: int
    heard: tuple[int, int]
    waiter: Waiting | None
    token: uuid.UUID
    sent: float
    after: ClaimKey | None


def claim(worker: WorkerState) -> int:
    """Write the outcomes that came in and claim what the producer (``worker/producer.py``)
    says, in one transaction (the engine's ``finish_and_claim``: on PostgreSQL usually one
    statement); hand the claimed jobs out. Returns how many jobs were claimed."""
    worker.producer.conflicted = False
    release_in_doubt(worker)
    worker.executor.outbox.gather()
    outcomes = worker.executor.outbox.take()
    worker.producer.sizer.observe(outcomes)
    asked = ask(worker, outcomes)
    if asked is None:
        return 0
    request = ClaimRequest(
        worker.worker_id, asked.limit, worker.options.lease_seconds,
        queues=list(worker.options.queues) or None,
        exclude_queues=sorted(worker.producer.paused),
        lease_token=asked.token, waiter=asked.waiter, after=asked.after,
    )
    try:
        written, jobs = contract.engine(Job.objects.db).finish_and_claim(outcomes, request)
    except ClaimConflict as conflict:
        conflicted(worker, outcomes, conflict, asked.after, asked.sent)
        return 0
    except BaseException as exc:
        from django_jobs.worker import isolation  # a write that failed

        if outcomes and isolation.refused(exc):  # an outcome the database will not take
            settle(worker, outcomes, *isolation.finish_one_by_one(outcomes, exc))
            return claim(worker)
        put_back(worker, outcomes, exc)
        if asked.limit > 0:
            worker.producer.in_doubt.append(asked.token)
        raise
    claimed(worker, asked, outcomes, written, jobs)
    return len(jobs)


def room(worker: WorkerState, outcomes: list[AttemptOutcome]) -> int:
    """How many jobs the turn may claim: what the sizer says, less for a suspect running
    alone (none) or suspects that may come (one), and within ``max_jobs``."""
    executor = worker.executor
    free = worker.producer.sizer.limit(len(executor.running) - len(outcomes))
    if executor.solo is not None and all(o.job.id != executor.solo.id for o in outcomes):
        free = 0  # a suspect runs alone (suspects.py): claim nothing until it has ended
    elif executor.one_at_a_time:
        free = min(free, 1)  # more suspects may come: none handed back (suspects.py)
    return max(worker.producer.budget_left(free), 0)


def ask(worker: WorkerState, outcomes: list[AttemptOutcome]) -> Claim | None:
    """The turn's claim, within the room and the listener's allowance; None if the turn
    has nothing to write and may claim nothing."""
    free = space = room(worker, outcomes)
    heard, waiter, listener = (0, 0), None, worker.listener
    if listener is not None:
        heard, pid, allowed = listener.heard_so_far(), listener.pid, listener.allowance()
        if worker.options.burst:  # it claims whatever is ready, and is no waiter (see above)
            pid, allowed = None, None
        elif listener.overlooked:
            # The overlooked jobs are at the ready index's front.
            worker.producer.cursor.restart()
        if allowed is not None:
            free = max(min(free, allowed), 0)  # waiting: the jobs it was told of (0: outcomes)
        if pid is not None and space > 0:
            waiter = Waiting(pid, space, holding=len(worker.executor.running) > len(outcomes))
    if free <= 0 and not outcomes:
        return None
    sent = time.monotonic()
    after = worker.producer.cursor.after(sent) if free > 0 else None  # producer.py
    return Claim(free, space, heard, waiter, uuid.uuid4(), sent, after)


def claimed(worker: WorkerState, asked: Claim, outcomes: list[AttemptOutcome],
            written: list[AttemptOutcome], jobs: list[Job]) -> None:
    """After the turn's write: move the claim cursor, tell the listener, record what was
    written and hand the claimed jobs out."""
    if asked.limit > 0:
        worker.producer.cursor.claimed(asked.after, jobs, asked.sent)
        if worker.listener is not None:
            worker.listener.claim_sent(asked.heard, asked.waiter is not None and
                                       len(jobs) < asked.room, len(jobs))
    record(worker, outcomes, written)
    if worker.executor.outbox.limit is not None and len(worker.executor.outbox):
        worker.wake.set()  # outcomes held back by the limit: write them in the next turn
    worker.producer.claimed += len(jobs)
    executor = worker.executor
    if executor.solo is None and not any(job.crashes for job in jobs):
        if jobs:  # no suspect: every batch but a few after a crash
            executor.one_at_a_time = False
        executor.hand_out(jobs)
        return
    from django_jobs.worker import suspects  # a suspect: it runs alone

    executor.hand_out(suspects.admit(worker, jobs,
                                     lambda job: Running(job, time.monotonic(), None)))


def conflicted(worker: WorkerState, outcomes: list[AttemptOutcome], conflict: ClaimConflict,
               after: ClaimKey | None, sent: float) -> None:
    """A turn whose claim met rows moved under it on every try (``ClaimConflict``,
    ``engine/moved_claims.py``): its outcomes were written apart from it, the claim took
    nothing. Not an outage: the worker claims again at once, its heartbeat going on as ever."""
    record(worker, outcomes, conflict.written)
    worker.producer.cursor.conflicted(after, sent)
    worker.producer.conflicted = True
    logger.debug("worker %s: %s; claiming again", worker.worker_id, conflict)


HB = "; they are pending again for any worker, their attempt not spent"


def release_in_doubt(worker: WorkerState) -> None:
    """Hand back the jobs of claims whose reply never came (see the module's docstring);
    raises, keeping the tokens, while the database is still away."""
    while worker.producer.in_doubt:
        released = Job.objects.release_claim(worker.producer.in_doubt[0])
        worker.producer.in_doubt.pop(0)
        if released:
            logger.warning(
                "worker %s: handed back %d job(s) of a claim whose reply was lost%s",
                worker.worker_id, released, HB,
                extra={"worker_id": worker.worker_id, "event": "jobs_handed_back",
                       "jobs": released, "reason": "the claim's reply was lost",
                       "next": HB[len("; they are "):]},
            )


def finish_outcomes(worker: WorkerState) -> None:
    """Write the outcomes that came in, claiming nothing (a stopping worker, or one that has
    claimed its ``max_jobs``); on an outage they wait in the outbox."""
    while True:  # more than one write only while timeouts hold writes to a limit
        outcomes = worker.executor.outbox.take()
        if not outcomes:
            return
        done = worker.safely(_finish_isolating, worker, outcomes)
        if done is None:  # the database is away: they wait in the outbox (outage.py)
            return
        settle(worker, outcomes, *done)
        if done[1]:  # an outage met on the way
            return


def _finish_isolating(
    worker: WorkerState, outcomes: list[AttemptOutcome]
) -> tuple[list[AttemptOutcome], list[AttemptOutcome]]:
    from django_jobs.worker import isolation

    try:
        return isolation.finish_isolating(outcomes)
    except BaseException as exc:
        put_back(worker, outcomes, exc)
        raise


def put_back(worker: WorkerState, outcomes: list[AttemptOutcome], exc: BaseException) -> None:
    """Outcomes a write could not make (``exc`` was not a refusal) go back to the outbox; after
    a timeout, later writes take half as many, and an outcome that timed out alone
    ``TIMEOUTS_ALONE`` times goes back as its failure (see the module's docstring)."""
    outbox = worker.executor.outbox
    if outcomes and classify(exc) is TIMEOUT:
        outbox.limit = max(1, len(outcomes) // 2)
        if len(outcomes) == 1:
            outcome = outcomes[0]
            tries = outbox.timeouts[outcome.job.id] = outbox.timeouts.get(outcome.job.id, 0) + 1
            if tries >= TIMEOUTS_ALONE:
                from django_jobs.worker import isolation

                del outbox.timeouts[outcome.job.id]
                logger.error("job %s: writing its outcome alone timed out %d times (%s); "
                             "recorded as a failed attempt", outcome.job.public_id, tries,
                             isolation.describe(exc))
                outcomes = [isolation.failure_in_place(
                    outcome, "OutcomeTimedOut",
                    f"the database timed out writing this job's outcome, alone, {tries} times: "
                    f"{isolation.describe(exc)}")]
    outbox.put_back(outcomes)


def settle(
    worker: WorkerState,
    outcomes: list[AttemptOutcome],
    written: list[AttemptOutcome],
    unwritten: list[AttemptOutcome],
) -> None:
    """After a write that may have left some outcomes ``unwritten``: those go back to the
    outbox, the others are recorded."""
    worker.executor.outbox.put_back(unwritten)
    record(worker, [o for o in outcomes if o not in unwritten], written)


def record(
    worker: WorkerState, outcomes: list[AttemptOutcome], written: list[AttemptOutcome]
) -> None:
    """After the write: free the slots, count, log and signal what was written. An outcome
    not ``written`` found its job no longer under its lease: taken over by another worker, or
    written already by a turn whose reply was lost (the outcome was sent again)."""
    free(worker, outcomes)
    lost = len(outcomes) - len(written)
    if lost:
        logger.warning(
            "worker %s: %d outcome(s) not written: the lease was taken over, or a turn whose "
            "reply was lost wrote them already", worker.worker_id, lost
        )
    worker.processed += len(written)
    log = logger.isEnabledFor(logging.DEBUG)
    for outcome in written:
        if log or outcome.kind != Outcome.COMPLETED:
            log_end(worker.worker_id, outcome)
    if written and job_finished.has_listeners(Job):  # off the loop (handoff.py)
        handoff.call(send_finished, [(o.job, o.kind, o.exception) for o in written])
    worker.tally.add(written)


def free(worker: WorkerState, outcomes: list[AttemptOutcome]) -> None:
    """The jobs of ``outcomes`` are no longer running; a write worked, so the outbox's limit
    (after timeouts) grows, or goes once the outbox is empty."""
    for outcome in outcomes:
        worker.executor.running.pop(outcome.job.id, None)
        worker.executor.outbox.timeouts.pop(outcome.job.id, None)
    if not len(worker.executor.outbox):
        worker.executor.outbox.limit = None  # what the timeouts held back is written: whole batches
    elif worker.executor.outbox.limit is not None:
        worker.executor.outbox.limit *= 2  # a write worked: try larger ones


def send_finished(finished: list[tuple[Job, str, BaseException | None]]) -> None:
    """``job_finished`` for each job written, robustly (``core/observers.py``)."""
    for job, kind, exception in finished:
        observers.send(job_finished, "job_finished", sender=Job, job=job, outcome=kind,
                       exception=exception)


# When a burst ends (see the module's docstring).

# A job that came due this recently may have come due after the claim before
# (``burst_due_in``); one made ready this long before a turn began may be that turn's
# (``burst_released``).
MARGIN = 1.0
# The shortest wait for a job due: it is claimed by the next turn.
MIN_WAIT = 0.05


def burst_now() -> datetime:
    """The database's time, taken before a turn: what that turn's writes are at or after (by
    the offset the heartbeat measured: no query)."""
    return timezone.now() + clock.offset(jobs_database())


def burst_released(worker: WorkerState, since: datetime) -> bool:
    """Whether a job of the worker's queues was made ready at once, at or after ``since``
    (less ``MARGIN``, for a clock offset measured again meanwhile), and is still ready: a turn
    begun then released it (see the module's docstring)."""
    jobs = Job.objects.in_states(*READY_STATES).filter(
        updated_at__gte=since - timedelta(seconds=MARGIN), run_at__lte=F("updated_at"))
    return _theirs(worker, jobs).exists()


def burst_due_in(worker: WorkerState) -> float | None:
    """Seconds until the first job the worker could run comes due, by the database's clock,
    if that is within ``burst_wait``; None if none is. A job due for longer than ``MARGIN``
    that the claim just before did not take is one the worker cannot run now (a limit refuses
    it): not waited for."""
    window = worker.options.burst_wait
    if window <= 0:
        return None
    jobs = Job.objects.in_states(*READY_STATES)
    at = clock.now(jobs.db)
    jobs = jobs.filter(run_at__gt=at - timedelta(seconds=MARGIN),
                       run_at__lte=at + timedelta(seconds=window))
    first = _theirs(worker, jobs).aggregate(first=Min("run_at"))["first"]
    if first is None:
        return None
    return max((first - at).total_seconds(), MIN_WAIT)


def _theirs(worker: WorkerState, jobs: JobQuerySet) -> JobQuerySet:
    """Those of ``jobs`` in the worker's queues, and not in a queue it finds paused."""
    if worker.options.queues:
        jobs = jobs.filter(queue__in=list(worker.options.queues))
    if worker.producer.paused:
        jobs = jobs.exclude(queue__in=sorted(worker.producer.paused))
    return jobs
