"""Feature hooks: the points where features (unique keys, dependencies, limits, callbacks,
follow-ups, groups, crash counting, recurring jobs, pruning) join the engine's verbs and the
worker's heartbeat.

The engine (``engine/``) and the worker import no feature. A feature subclasses ``Feature``,
overrides the points it joins (every default does nothing) and is registered once, when the
app starts (``apps.py``). The engine (the worker, for ``periodic_steps``) calls the module
functions below at each point; they ask the registered features in registration order. The
points::

    Point                     Verb            Called
    ------------------------  --------------  ------------------------------------------------
    enqueue_insert            enqueue(_many)  after validation, only when an option the feature
                                              reads is given (``enqueue_reads``, or its
                                              handler's ``handler_reads``): checks them and
                                              may return an ``Insert`` that takes over
    joins_finish              finish          whether ``after_finish`` has work for a job (if
                                              none has, a PostgreSQL turn is one statement)
    limits_claims / admit     claim           which claims need admission; the candidates,
                                              locked, in the claim's transaction
    claim_without_row_locks   claim           without row locks (SQLite), in place of admit:
                                              the whole admitted claim, or None
    after_finish              finish          in the finish transaction, with what was written
                                              (in a worker's turn, a feature that is
                                              ``late_in_turn``: after the turn's claim)
    hold_for_cancel / ended   cancel          rows read (and locked) before the cancel; jobs
                                              that ended outside a finish (cancel, rescue)
    reopen                    retry           before the rows leave an end state (dead,
                                              canceled) for pending, in the retry's transaction
    release                   heartbeat       waiting jobs a feature no longer holds back
    rescue                    heartbeat       the lost attempts of jobs whose lease expired
    periodic_steps            heartbeat       work a worker does on each heartbeat (recurring
                                              jobs, pruning), outside any verb

Which features join a point is decided without entering them: a feature says on its class
what a job carries when it acts at the job's end (``marks``: ``callback_url``, ``group_id``,
...) and what configures it (``configured_by``: settings, handlers' options), and a feature
joins only the points it overrides. A job that carries no feature's mark is finished, canceled
or rescued without a call into any feature, and a feature nothing configures joins no claim and
adds no heartbeat step. A worker decides which features are configured at each heartbeat
(``decide``; its first is at its start), and its claims go by that until the next; a process
that runs no worker reads the configuration at each claim.

A hook runs inside the verb's transaction: what it writes commits or rolls back with the
verb's own write (a periodic step is the exception: it runs in no transaction of the worker's).
Hooks that write jobs do so through the engine's verbs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime
from typing import TYPE_CHECKING

from django.core.signals import setting_changed

if TYPE_CHECKING:
    from django_jobs.core.contract import EnqueueOptions
    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.engine.writes import ClaimFields
    from django_jobs.models import Job
    from django_jobs.models.managers import JobManager, JobQuerySet

# Takes over an enqueue's insert: (manager, jobs built) -> one job per input, in order.
Insert = Callable[["JobManager", list["Job"]], list["Job"]]
# Work on a worker's heartbeat: called with the worker's id; every worker runs it, so it is
# idempotent across workers (the database decides).
Step = Callable[[str], object]


class Feature:
    """A feature's hooks; subclass and override the points the feature joins."""

    name = "feature"
    # True: in a worker's turn, ``after_finish`` runs at the turn's end, after its claim. For
    # a feature whose finish takes a row lock that many turns meet (a group's row): the lock is
    # then held for its own statements and the commit, not for the claim as well.
    late_in_turn = False
    # The job fields that mark a job this feature acts on at its end (a finish, or a cancel or
    # rescue that ends it): ``after_finish`` and ``ended`` are called only when a job of theirs
    # has one of them set (a true value), and the engine reads them itself. Empty: the
    # feature's ``joins_finish`` decides, and ``after_finish`` and ``ended`` see every end.
    marks: tuple[str, ...] = ()
    # What configures this feature: names of DJANGO_JOBS settings, or ``handler.<option>`` for
    # an option of the registered handlers (``handler.limits``). While none is set, the feature
    # joins no claim (``limits_claims``, ``admit``, ``claim_without_row_locks``) and has no
    # heartbeat step. Empty: always configured.
    configured_by: tuple[str, ...] = ()
    # False: its heartbeat steps have nothing to do at a worker's start (a pass spread over its
    # first interval): the worker runs them from its second heartbeat on.
    steps_at_start = True

    # The options of an enqueue (fields of ``EnqueueOptions``) and the attributes of its
    # handler (``handlers/registry.Handler``) this feature reads: ``enqueue_insert`` is called
    # when one of them is not None, and an enqueue that sets none enters no feature.
    enqueue_reads: tuple[str, ...] = ()
    handler_reads: tuple[str, ...] = ()

    def enqueue_insert(self, type: str, options: EnqueueOptions) -> Insert | None:
        """Check the options this feature reads (raise InvalidJob on bad ones); return an
        ``Insert`` to take over the insert, or None."""
        return None

    def limits_claims(self) -> bool:
        """True if some claim may need ``admit``: the engine then selects candidates first
        instead of claiming in one statement."""
        return False

    def admit(self, manager: JobManager, jobs: list[Job], ready: JobQuerySet, limit: int,
              now: datetime) -> list[Job]:
        """On a database with row locks: of the candidates ``jobs`` (locked, selected from the
        ``ready`` queryset), those this claim may take."""
        return jobs

    def claim_without_row_locks(self, manager: JobManager, ready: JobQuerySet, claim: ClaimFields,
                                limit: int, now: datetime) -> list[Job] | None:
        """On a database without row locks, the whole claim (``claim``: the fields it writes)
        when this feature must admit it; None to leave it to the engine."""
        return None

    def joins_finish(self, job: Job) -> bool:
        """For a feature without ``marks``: True if ``after_finish`` may have work when ``job``
        finishes. Asked for every job a worker ends: read the job's fields, make no query."""
        return False

    def after_finish(self, manager: JobManager, written: list[AttemptOutcome],
                     now: datetime) -> None:
        """In the finish transaction: the outcomes written (their jobs carry the new state)."""

    def hold_for_cancel(self, cancelable: JobQuerySet) -> list[Job]:
        """Before a cancel: the rows of the ``cancelable`` queryset this feature acts on once
        they are canceled, read (and locked where the database can) until commit."""
        return []

    def ended(self, jobs: Sequence[Job], using: str) -> None:
        """Jobs that reached an end state outside a finish (canceled, or dead by a rescue), in
        the transaction that ended them."""

    def reopen(self, retried: JobQuerySet) -> None:
        """Before a retry (in its transaction): ``retried`` are the rows it will make pending,
        some of them dead or canceled (ended) until then."""

    def release(self, manager: JobManager, waiting: JobQuerySet, now: datetime) -> int:
        """Make pending the jobs of the ``waiting`` queryset this feature held back and no
        longer does; returns how many."""
        return 0

    def rescue(self, manager: JobManager, *, limit: int, now: datetime) -> list[Job] | None:
        """Record the lost attempts of up to ``limit`` stale jobs, in the caller's transaction;
        returns the jobs rescued, or None to leave the rescue to the next feature."""
        return None

    def periodic_steps(self) -> Sequence[Step]:
        """The steps a worker runs on each of its heartbeats for this feature, made once per
        worker: a step may keep state from one heartbeat to the next (when it next has work,
        for one) and skips the heartbeats it has nothing to do on."""
        return ()


_features: list[Feature] = []
# What the registered features read of an enqueue (``enqueue_reads``, ``handler_reads``): the
# engine asks ``enqueue_insert`` only when one of them is set (``engine/verbs.asks_features``).
enqueue_reads: tuple[str, ...] = ()
handler_reads: tuple[str, ...] = ()
# Made from the features at each register/unregister: the marks a finished job is read for,
# and the features without marks whose ``joins_finish`` is asked.
_finish_marks: tuple[str, ...] = ()
_asked_at_finish: tuple[Feature, ...] = ()
# The features configured, as decided last (``decide``): a worker decides at its first heartbeat
# and again at each one, so that its claims do not read the settings and the handlers' options
# each time. None: undecided, read at each call (a process that runs no worker).
_decided: tuple[Feature, ...] | None = None
_decided_handlers = 0  # how many handlers were registered then: a new one is decided on too


def register(feature: Feature) -> Feature:
    """Add a feature after those registered; registering the same class again replaces it."""
    for index, known in enumerate(_features):
        if type(known) is type(feature):
            _features[index] = feature
            break
    else:
        _features.append(feature)
    _read()
    _plan()
    if _decided is not None:
        decide()
    return feature


def unregister(feature: Feature) -> None:
    """Take a feature's hooks out (a test's own feature, for one)."""
    _features[:] = [known for known in _features if known is not feature]
    _read()
    _plan()
    if _decided is not None:
        decide()


def _read() -> None:
    global enqueue_reads, handler_reads
    enqueue_reads = tuple(dict.fromkeys(n for f in _features for n in f.enqueue_reads))
    handler_reads = tuple(dict.fromkeys(n for f in _features for n in f.handler_reads))


def _plan() -> None:
    global _finish_marks, _asked_at_finish
    finishing = [feature for feature in _features if joins(feature, "after_finish")]
    _finish_marks = tuple(dict.fromkeys(mark for feature in finishing for mark in feature.marks))
    _asked_at_finish = tuple(feature for feature in finishing
                             if not feature.marks and joins(feature, "joins_finish"))


def joins(feature: Feature, point: str) -> bool:
    """True if ``feature`` overrides the hook ``point`` (a feature joins only those)."""
    return getattr(type(feature), point) is not getattr(Feature, point)


def marked(jobs: Sequence[Job], marks: Sequence[str]) -> bool:
    """True if one of ``jobs`` has one of the fields ``marks`` set."""
    return any(getattr(job, mark, None) for job in jobs for mark in marks)


def configured(feature: Feature) -> bool:
    """True if something configures ``feature`` (``Feature.configured_by``), as set now."""
    if not feature.configured_by:
        return True
    from django_jobs.core.settings import jobs_settings
    from django_jobs.handlers import registry

    for name in feature.configured_by:
        option = name.removeprefix("handler.")
        if option != name:
            if any(getattr(found, option, None) for found in registry.registered.values()):
                return True
        elif getattr(jobs_settings, name, None):
            return True
    return False


def decide() -> None:
    """Decide which features are configured, as set now, and keep it until the next ``decide``
    (a worker's heartbeat), a feature's or a handler's registration, or a setting's change."""
    global _decided, _decided_handlers
    from django_jobs.handlers import registry

    _decided_handlers = len(registry.registered)
    _decided = tuple(feature for feature in _features if configured(feature))


def forget() -> None:
    """Read what is configured at each call again (a worker's end; a setting changed)."""
    global _decided
    _decided = None


setting_changed.connect(lambda **_kwargs: forget(), weak=False)


def _configured() -> Sequence[Feature]:
    from django_jobs.handlers import registry

    decided = _decided
    if decided is not None and len(registry.registered) == _decided_handlers:
        return decided
    return [feature for feature in _features if configured(feature)]


def _claimers(point: str) -> list[Feature]:
    return [feature for feature in _configured() if joins(feature, point)]


def registered() -> tuple[Feature, ...]:
    """The features, in the order their hooks run."""
    return tuple(_features)


def enqueue_insert(type: str, options: EnqueueOptions, handler: object) -> Insert | None:
    """Each feature that reads an option given (or an attribute ``handler`` has) checks it; at
    most one may take over the insert."""
    taken: Insert | None = None
    for feature in _features:
        if not _reads(feature, options, handler):
            continue
        insert = feature.enqueue_insert(type, options)
        if insert is not None:
            if taken is not None:
                raise RuntimeError(f"two features take over the insert of {type!r}")
            taken = insert
    return taken


def _reads(feature: Feature, options: EnqueueOptions, handler: object) -> bool:
    return any(getattr(options, name) is not None for name in feature.enqueue_reads) or any(
        getattr(handler, name, None) is not None for name in feature.handler_reads)


def limits_claims() -> bool:
    return any(feature.limits_claims() for feature in _claimers("limits_claims"))


def admit(manager: JobManager, jobs: list[Job], ready: JobQuerySet, limit: int,
          now: datetime) -> list[Job]:
    for feature in _claimers("admit"):
        if not jobs:
            break
        jobs = feature.admit(manager, jobs, ready, limit, now)
    return jobs


def claim_without_row_locks(manager: JobManager, ready: JobQuerySet, claim: ClaimFields, limit: int,
                            now: datetime) -> list[Job] | None:
    for feature in _claimers("claim_without_row_locks"):
        claimed = feature.claim_without_row_locks(manager, ready, claim, limit, now)
        if claimed is not None:
            return claimed
    return None


def joins_finish(job: Job) -> bool:
    for mark in _finish_marks:  # loops, not any(): asked for every job a worker ends
        if getattr(job, mark, None):
            return True
    for feature in _asked_at_finish:
        if feature.joins_finish(job):
            return True
    return False


def _acts_on(feature: Feature, jobs: Sequence[Job]) -> bool:
    return not feature.marks or marked(jobs, feature.marks)


# In a worker's turn (``late``): the after_finish calls that wait for the turn's end
_late: ContextVar[list[tuple[Feature, JobManager, list[AttemptOutcome], datetime]] | None] = \
    ContextVar("django_jobs_late", default=None)


def after_finish(manager: JobManager, written: list[AttemptOutcome], now: datetime) -> None:
    late = _late.get()
    jobs = [outcome.job for outcome in written]
    for feature in _features:
        if not joins(feature, "after_finish") or not _acts_on(feature, jobs):
            continue
        if late is not None and feature.late_in_turn:
            late.append((feature, manager, written, now))
        else:
            feature.after_finish(manager, written, now)


@contextmanager
def late() -> Iterator[Callable[[], None]]:
    """A worker's turn: in the block, the ``after_finish`` of the features ``late_in_turn``
    waits; the callable yielded runs it (after the turn's claim, in its transaction)."""
    waiting: list[tuple[Feature, JobManager, list[AttemptOutcome], datetime]] = []
    token = _late.set(waiting)

    def run() -> None:
        _late.reset(token)
        for feature, manager, written, now in waiting:
            feature.after_finish(manager, written, now)
        waiting.clear()

    try:
        yield run
    finally:
        if _late.get() is waiting:
            _late.reset(token)


def hold_for_cancel(cancelable: JobQuerySet) -> list[Job]:
    held: dict[int, Job] = {}
    for feature in _features:
        for job in feature.hold_for_cancel(cancelable):
            held.setdefault(job.pk, job)
    return list(held.values())


def ended(jobs: Sequence[Job], using: str) -> None:
    if jobs:
        for feature in _features:
            if joins(feature, "ended") and _acts_on(feature, jobs):
                feature.ended(jobs, using)


def reopen(retried: JobQuerySet) -> None:
    for feature in _features:
        feature.reopen(retried)


def release(manager: JobManager, waiting: JobQuerySet, now: datetime) -> int:
    return sum(feature.release(manager, waiting, now) for feature in _features)


def rescue(manager: JobManager, *, limit: int, now: datetime) -> list[Job]:
    """The first feature that answers does the rescue (crash counting, registered by the app)."""
    for feature in _features:
        rescued = feature.rescue(manager, limit=limit, now=now)
        if rescued is not None:
            return rescued
    return []


def periodic_steps(made: dict[Feature, Sequence[Step]], *, starting: bool = False) -> list[Step]:
    """The heartbeat steps of the features registered and configured, in their order (at a
    worker's first heartbeat, ``starting``, those of the features whose ``steps_at_start``).
    ``made`` is one worker's: a feature's steps are made the first time the worker asks and
    kept, and those of a feature no longer registered are dropped."""
    for gone in [feature for feature in made if feature not in _features]:
        del made[gone]
    steps: list[Step] = []
    configured_now = _configured()
    for feature in _features:
        if not joins(feature, "periodic_steps") or feature not in configured_now or \
                (starting and not feature.steps_at_start):
            continue
        if feature not in made:
            made[feature] = tuple(feature.periodic_steps())
        steps.extend(made[feature])
    return steps
