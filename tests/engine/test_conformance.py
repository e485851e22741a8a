"""One suite every engine passes: each verb of ``JobEngine`` (``core/contract.py``) and each part of
``DatabaseParts`` (``core/database_parts.py``), real or null, held to its one-line promise.

It runs under every ``DJANGO_JOBS_TEST_DB`` (PostgreSQL, MariaDB, SQLite) against the engine and
the parts the factory picks for the test database, and says nothing of how an engine keeps a
promise: the same test holds PostgreSQL's hand-written statements, MariaDB's and SQLite's ORM
verbs, and the null parts alike. A part that differs by database (wake-ups, partitions, the
horizon) is held to the promise its database makes, chosen by what the part says of itself
(``available()``, ``partitioned()``) or, where it says nothing, by the vendor.
"""

from __future__ import annotations

import threading
import time
import uuid
from datetime import date, timedelta

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from django_jobs.core import clock
from django_jobs.core.contract import ClaimRequest, EnqueueOptions, JobEngine
from django_jobs.core.database_parts import NO_PARTS, DatabaseParts, parts
from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.core.shelves import KEPT_SHELF, OPEN_SHELF, clamp
from django_jobs.engine import engine_for
from django_jobs.exceptions import InvalidJob
from django_jobs.models import Job, JobAttempt, QueueState

pytestmark = pytest.mark.django_db

P = Job.Status


@pytest.fixture
def engine() -> JobEngine:
    return engine_for(Job.objects.db)


@pytest.fixture
def db_parts() -> DatabaseParts:
    return parts(Job.objects.db)


def enqueue(engine: JobEngine, type: str, payload=None, **options) -> Job:
    """The engine's enqueue verb with ``Job.enqueue``'s keyword options."""
    return engine.enqueue(type, payload, EnqueueOptions(**options))


def enqueue_many(engine: JobEngine, type: str, payloads, **options) -> list[Job]:
    return engine.enqueue_many(type, payloads, EnqueueOptions(**options))


def request(limit: int = 10, **options) -> ClaimRequest:
    return ClaimRequest("conformance", limit, 30.0, **options)


def claim_one(engine: JobEngine, job: Job) -> Job:
    """``job`` claimed (the only ready job)."""
    [claimed] = engine.claim(request(1))
    assert claimed.pk == job.pk
    return claimed


def completed(job: Job) -> AttemptOutcome:
    now = timezone.now()
    return AttemptOutcome(job, "completed", now, now, result={"ok": True})


def statuses(*jobs: Job) -> list[str]:
    return [Job.objects.get(pk=job.pk).status for job in jobs]


# The verbs.

def test_enqueue_inserts_one_pending_job(engine):
    job = enqueue(engine, "echo", {"n": 1}, queue="q1", priority=3)
    row = Job.objects.get(pk=job.pk)
    assert (row.type, row.payload, row.queue, row.priority, row.status) == (
        "echo", {"n": 1}, "q1", 3, P.PENDING)


def test_enqueue_validates_before_writing(engine):
    with pytest.raises(InvalidJob):
        enqueue(engine, "echo", {"bad": object()})
    assert not Job.objects.exists()


def test_enqueue_writes_in_the_callers_transaction(engine):
    with transaction.atomic():
        enqueue(engine, "echo")
        transaction.set_rollback(True)
    assert not Job.objects.exists()


def test_enqueue_many_inserts_one_job_per_payload_with_the_same_options(engine):
    jobs = enqueue_many(engine, "echo", [{"n": n} for n in range(3)], queue="many", priority=2)
    rows = list(Job.objects.filter(pk__in=[j.pk for j in jobs]).order_by("pk"))
    assert [r.payload for r in rows] == [{"n": 0}, {"n": 1}, {"n": 2}]
    assert {(r.queue, r.priority, r.status) for r in rows} == {("many", 2, P.PENDING)}


def test_claim_takes_up_to_the_limit_in_claim_order(engine):
    low = enqueue(engine, "echo", priority=0)
    high = enqueue(engine, "echo", priority=5)
    second = enqueue(engine, "echo", priority=0)
    claimed = engine.claim(request(2))
    assert [j.pk for j in claimed] == [high.pk, low.pk]
    assert all(j.status == P.PROCESSING and j.lease_token for j in claimed)
    assert statuses(second) == [P.PENDING]


def test_claim_takes_only_ready_jobs_of_the_queues_asked(engine):
    enqueue(engine, "echo", run_at=timezone.now() + timedelta(hours=1))
    enqueue(engine, "echo", queue="other")
    enqueue(engine, "echo", queue="paused")
    wanted = enqueue(engine, "echo", queue="wanted")
    claimed = engine.claim(request(10, queues=["wanted", "paused"], exclude_queues=["paused"]))
    assert [j.pk for j in claimed] == [wanted.pk]
    assert engine.claim(request(10, queues=["none"])) == []


def test_finish_writes_outcomes_fenced_on_the_lease(engine):
    job = claim_one(engine, enqueue(engine, "echo"))
    stale = Job.objects.get(pk=job.pk)
    stale.lease_token = uuid.uuid4()  # a lease the job no longer has
    assert engine.finish([completed(stale)]) == []
    assert statuses(job) == [P.PROCESSING]
    [written] = engine.finish([completed(job)])
    assert written.job.pk == job.pk
    row = Job.objects.get(pk=job.pk)
    assert (row.status, row.result) == (P.COMPLETED, {"ok": True})
    assert JobAttempt.objects.filter(job_id=job.pk).count() == 1


def test_finish_and_claim_finishes_then_claims(engine):
    first = claim_one(engine, enqueue(engine, "echo"))
    following = enqueue(engine, "echo")
    written, claimed = engine.finish_and_claim([completed(first)], request(5))
    assert [o.job.pk for o in written] == [first.pk]
    assert [j.pk for j in claimed] == [following.pk]
    assert statuses(first, following) == [P.COMPLETED, P.PROCESSING]


def test_heartbeat_renews_held_leases_and_says_which_are_asked_to_cancel(engine):
    kept = enqueue(engine, "echo")
    asked = enqueue(engine, "echo")
    lost = enqueue(engine, "echo")
    claimed = {j.pk: j for j in engine.claim(request(3))}
    Job.objects.filter(pk=asked.pk).update(cancel_requested=True)
    before = Job.objects.get(pk=kept.pk).leased_until
    held = {pk: job.lease_token for pk, job in claimed.items()}
    held[lost.pk] = uuid.uuid4()  # not the job's lease any more
    still, cancel = engine.heartbeat(held=held, lease_seconds=3600)
    assert still == {kept.pk, asked.pk}
    assert cancel == {asked.pk}
    assert Job.objects.get(pk=kept.pk).leased_until > before


def test_rescue_records_the_lost_attempts_of_expired_leases(engine):
    job = claim_one(engine, enqueue(engine, "echo", max_attempts=3))
    leased_until = Job.objects.get(pk=job.pk).leased_until
    assert engine.rescue(now=leased_until - timedelta(seconds=1)) == []
    after = leased_until + timedelta(seconds=1)
    assert engine.rescue(now=after, since=after) == []  # ran out before ``since``
    rescued = engine.rescue(now=after)
    assert [j.pk for j in rescued] == [job.pk]
    row = Job.objects.get(pk=job.pk)
    assert row.status != P.PROCESSING and row.crashes == 1
    assert JobAttempt.objects.filter(job_id=job.pk).count() == 1


def test_release_hands_held_jobs_back_with_their_attempt_unspent(engine):
    job = claim_one(engine, enqueue(engine, "echo"))
    attempt = Job.objects.get(pk=job.pk).attempt
    assert engine.release([job], delay=3600) == 1
    row = Job.objects.get(pk=job.pk)
    assert row.status == P.PENDING and row.attempt == attempt - 1
    assert row.run_at > clock.now(Job.objects.db) + timedelta(seconds=3000)
    assert engine.claim(request(1)) == []  # due in an hour


def test_release_claim_hands_back_the_jobs_of_one_lease_token(engine):
    mine = enqueue(engine, "echo")
    token = uuid.uuid4()
    claim_one_with = engine.claim(request(1, lease_token=token))
    assert [j.pk for j in claim_one_with] == [mine.pk]
    other = claim_one(engine, enqueue(engine, "echo"))
    assert engine.release_claim(uuid.uuid4()) == 0
    assert engine.release_claim(token) == 1
    assert statuses(mine, other) == [P.PENDING, P.PROCESSING]


def test_release_waiting_makes_pending_the_jobs_nothing_holds_back(engine):
    done = enqueue(engine, "echo")
    dependent = enqueue(engine, "echo", depends_on=[done])
    assert statuses(dependent) == [P.WAITING]
    assert engine.release_waiting() == 0  # its dependency has not completed
    Job.objects.filter(pk=done.pk).update(status=P.COMPLETED)  # behind the features' backs
    assert engine.release_waiting() == 1
    assert statuses(dependent) == [P.PENDING]


def test_record_progress_is_fenced_on_the_lease(engine):
    job = claim_one(engine, enqueue(engine, "echo"))
    assert engine.record_progress(job, 0.5, "half") is True
    assert Job.objects.get(pk=job.pk).progress == {"fraction": 0.5, "message": "half"}
    stale = Job.objects.get(pk=job.pk)
    stale.lease_token = uuid.uuid4()
    assert engine.record_progress(stale, 0.9, "late") is False
    assert Job.objects.get(pk=job.pk).progress == {"fraction": 0.5, "message": "half"}


def staffed(engine: JobEngine) -> dict[str, Job]:
    """One job in each status a staff verb tells apart."""
    jobs = {status: enqueue(engine, "echo", {"status": status}, max_attempts=1)
            for status in (P.PENDING, P.FAILED, P.DEAD, P.CANCELED, P.COMPLETED)}
    jobs[P.PROCESSING] = enqueue(engine, "echo", {"status": P.PROCESSING})
    for status, job in jobs.items():
        if status == P.PENDING:
            continue
        Job.objects.filter(pk=job.pk).update(
            status=status, attempt=1, lease_token=uuid.uuid4() if status == P.PROCESSING else None,
            finished_at=timezone.now() if status in (P.DEAD, P.CANCELED, P.COMPLETED) else None)
    return jobs


def test_retry_makes_dead_failed_and_canceled_jobs_pending_with_an_attempt_left(engine):
    jobs = staffed(engine)
    assert engine.retry(Job.objects.all()) == 3
    for status in (P.FAILED, P.DEAD, P.CANCELED):
        row = Job.objects.get(pk=jobs[status].pk)
        assert row.status == P.PENDING and row.max_attempts > row.attempt
    assert statuses(jobs[P.COMPLETED], jobs[P.PROCESSING]) == [P.COMPLETED, P.PROCESSING]


def test_retry_with_payload_corrects_and_retries_dead_jobs_only(engine):
    jobs = staffed(engine)
    with pytest.raises(InvalidJob):
        engine.retry_with_payload(Job.objects.all(), {"bad": object()})
    assert statuses(jobs[P.DEAD]) == [P.DEAD]
    assert engine.retry_with_payload(Job.objects.all(), {"fixed": True}) == 1
    row = Job.objects.get(pk=jobs[P.DEAD].pk)
    assert (row.status, row.payload) == (P.PENDING, {"fixed": True})
    assert statuses(jobs[P.FAILED], jobs[P.CANCELED]) == [P.FAILED, P.CANCELED]


def test_cancel_cancels_idle_jobs_and_asks_running_ones(engine):
    jobs = staffed(engine)
    engine.cancel(Job.objects.all())
    assert statuses(jobs[P.PENDING], jobs[P.FAILED]) == [P.CANCELED, P.CANCELED]
    running = Job.objects.get(pk=jobs[P.PROCESSING].pk)
    assert running.status == P.PROCESSING and running.cancel_requested
    assert statuses(jobs[P.COMPLETED], jobs[P.DEAD]) == [P.COMPLETED, P.DEAD]


def test_run_now_makes_scheduled_jobs_due(engine):
    later = enqueue(engine, "echo", run_at=timezone.now() + timedelta(days=1))
    assert engine.claim(request(1)) == []
    assert engine.run_now(Job.objects.filter(pk=later.pk)) == 1
    assert [j.pk for j in engine.claim(request(1))] == [later.pk]


def test_delete_batch_deletes_up_to_the_limit_oldest_first_with_attempts(engine):
    jobs = [claim_one(engine, enqueue(engine, "echo")) for _ in range(3)]
    engine.finish([completed(job) for job in jobs])
    assert engine.delete_batch(Job.objects.all(), limit=2) == 2
    assert list(Job.objects.values_list("pk", flat=True)) == [jobs[2].pk]
    assert list(JobAttempt.objects.values_list("job_id", flat=True)) == [jobs[2].pk]


def test_discard_deletes_every_job_no_worker_holds(engine):
    jobs = staffed(engine)
    assert engine.discard(Job.objects.all()) == 5
    assert list(Job.objects.values_list("pk", flat=True)) == [jobs[P.PROCESSING].pk]


def test_pause_and_resume_say_whether_they_changed_the_queue(engine):
    assert engine.pause("conf") is True
    assert engine.pause("conf") is False
    assert QueueState.objects.get(name="conf").paused
    assert engine.resume("conf") is True
    assert engine.resume("conf") is False
    assert not QueueState.objects.get(name="conf").paused


# The parts beyond the verbs.

def test_the_factory_gives_postgresql_its_own_parts_and_the_others_the_null_ones(db_parts):
    assert isinstance(db_parts, DatabaseParts)
    assert parts(Job.objects.db) is db_parts  # made once per database
    assert (db_parts is NO_PARTS) == (connection.vendor != "postgresql")


def test_without_the_app_the_parts_say_how_to_wire_them():
    from django_jobs.core import database_parts

    provided = database_parts._parts_for
    database_parts.provide(None)  # type: ignore[arg-type]
    try:
        with pytest.raises(ImproperlyConfigured, match="INSTALLED_APPS"):
            parts(Job.objects.db)
    finally:
        database_parts.provide(provided)  # type: ignore[arg-type]


def test_session_keeps_the_loops_statements_on_generic_plans(db_parts):
    """Real: the session runs on generic plans while asked; null: nothing is set."""
    db_parts.session.keep_generic_plans()
    try:
        Job.enqueue("echo")  # the engine's cursor: made again, with the setting
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SHOW plan_cache_mode")
                assert cursor.fetchone()[0] == "force_generic_plan"
    finally:
        db_parts.session.keep_generic_plans(keep=False)
    assert Job.objects.count() == 1


@pytest.mark.django_db(transaction=True)
def test_wakeups_wake_the_worker_on_an_enqueue_or_are_none(db_parts):
    """Real: started, they hear an enqueue committed for the worker's queues; null: None, the
    worker polls."""
    wake = threading.Event()
    wakeups = db_parts.session.start_wakeups(wake, poll_interval=3600, queues=["woken"])
    if connection.vendor != "postgresql":
        assert wakeups is None
        return
    assert wakeups is not None
    try:
        deadline = time.monotonic() + 30
        while wakeups.pid is None and time.monotonic() < deadline:
            wake.wait(0.1)
        assert wakeups.pid is not None, "the listener never listened"
        before = wakeups.heard_so_far()
        Job.enqueue("echo", queue="woken")
        while wakeups.heard_so_far() == before and time.monotonic() < deadline:
            wake.wait(0.05)
        assert wakeups.heard_so_far() != before
    finally:
        wakeups.stop()


def test_partitions_say_whether_the_table_is_partitioned(db_parts):
    partitions = db_parts.partitions
    if connection.vendor != "postgresql":
        assert partitions.partitioned() is False
    else:
        with connection.cursor() as cursor:
            cursor.execute("SELECT relkind FROM pg_class WHERE oid = 'django_jobs_job'::regclass")
            assert partitions.partitioned() == (cursor.fetchone()[0] == "p")


def test_partitions_last_day_bounds_the_shelves_a_finish_stores(db_parts):
    partitions = db_parts.partitions
    last = partitions.last_day()
    if not partitions.partitioned():
        assert last is None
        assert clamp(date(3000, 1, 1), partitions.last_day) == date(3000, 1, 1)
        return
    assert last is not None and last >= clock.now(Job.objects.db).date()
    assert clamp(last, partitions.last_day) == last
    assert clamp(last + timedelta(days=1), partitions.last_day) == KEPT_SHELF
    assert clamp(OPEN_SHELF, partitions.last_day) == OPEN_SHELF


def test_partitions_count_and_name_what_the_drops_take(db_parts, engine):
    """Without partitions: nothing to drop, nothing spared from the batched prune, no pass. With
    them: a finished job on the first day's shelf is counted for a drop through that day (not
    once ``kept`` selects it), and that day is among the shelves left to the drop."""
    partitions = db_parts.partitions
    today = clock.now(Job.objects.db).date()
    if not partitions.partitioned():
        assert partitions.dropped_jobs(today, Q(pk__in=[])) == {}
        assert partitions.dropped_soon(today) is None
        assert partitions.upkeep(today, [timedelta(days=1)], Q(pk__in=[]), 100) is None
        return
    soon = partitions.dropped_soon(today)
    assert soon is not None and soon[1] == today + timedelta(days=1)
    first, none = soon[0], Q(pk__in=[])
    job = claim_one(engine, enqueue(engine, "echo"))
    engine.finish([completed(job)])
    before = partitions.dropped_jobs(first, none)  # other tests' days left behind count too
    earlier = partitions.dropped_jobs(first - timedelta(days=1), none)
    # Dead and depended on: a job the drop keeps when ``kept`` selects it.
    Job.objects.filter(pk=job.pk).update(shelf=first, status=P.DEAD, has_dependents=True)
    JobAttempt.objects.filter(job_id=job.pk).update(shelf=first)
    counted = partitions.dropped_jobs(first, none)
    assert counted == {**before, P.DEAD: before.get(P.DEAD, 0) + 1}
    assert partitions.dropped_jobs(first, Q(pk=job.pk)) == before
    assert partitions.dropped_jobs(first - timedelta(days=1), none) == earlier


def test_horizon_names_what_holds_vacuum_back_or_has_none(db_parts):
    horizon = db_parts.horizon
    if not horizon.available():
        assert connection.vendor != "postgresql"
        assert horizon.holders() == []
        assert horizon.read() is None
        return
    from tests.worker.test_horizon import open_holder

    holder = open_holder("conformance-holder")
    try:
        pid = holder.info.backend_pid
        found = [h for h in horizon.holders() if h.pid == pid]
        assert [h.kind for h in found] == ["snapshot"]
        read = horizon.read()
        assert read is not None and read.holder is not None
    finally:
        holder.close()


def test_replay_has_no_lag_on_a_database_that_is_no_standby(db_parts):
    assert db_parts.replay.lag_seconds() is None
