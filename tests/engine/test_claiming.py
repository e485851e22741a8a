"""Claim order, concurrent claims, leases, fencing, rescue, release and the verbs."""

import os
import threading
import uuid
from datetime import timedelta

import pytest
from django.conf import settings
from django.db import connections, transaction
from django.test import override_settings
from django.utils import timezone

from django_jobs.core.outcomes import AttemptOutcome
from django_jobs.engine.mariadb.locks import CANDIDATES_PER_SLOT
from django_jobs.models import Job, JobAttempt
from tests.conftest import requires_postgres
from tests.helpers import claim

pytestmark = pytest.mark.django_db(transaction=True)
S = Job.Status


def completed(job):
    now = timezone.now()
    return AttemptOutcome(job=job, kind="completed", started_at=now, finished_at=now)


def test_claim_order_is_priority_then_run_at_then_age():
    now = timezone.now()
    low = Job.enqueue("echo", priority="low")
    later = Job.enqueue("echo", run_at=now - timedelta(seconds=1))
    earlier = Job.enqueue("echo", run_at=now - timedelta(seconds=5))
    high = Job.enqueue("echo", priority="high")
    same_a = Job.enqueue("echo", run_at=now - timedelta(seconds=1))
    got = claim()
    assert [j.pk for j in got] == [high.pk, earlier.pk, later.pk, same_a.pk, low.pk]
    assert all(j.status == S.PROCESSING and j.attempt == 1 for j in got)


def test_claim_marks_rows_processing_with_a_lease():
    job = Job.enqueue("echo")
    (got,) = claim(worker_id="w9", lease_seconds=30)
    job.refresh_from_db()
    assert job.status == S.PROCESSING and job.worker_id == "w9"
    assert job.lease_token == got.lease_token is not None
    assert job.leased_until > timezone.now() + timedelta(seconds=25)
    assert claim() == []  # nothing left


def claim_in_threads(threads: int, **options) -> list[list[int]]:
    """Threads, each with its own connection, claiming 7 at a time until nothing is left: the
    ids each one took."""
    taken: list[list[int]] = [[] for _ in range(threads)]
    errors = []

    def claimer(i):
        try:
            while got := claim(limit=7, worker_id=f"w{i}", **options):
                taken[i].extend(j.pk for j in got)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    running = [threading.Thread(target=claimer, args=(i,)) for i in range(threads)]
    for t in running:
        t.start()
    for t in running:
        t.join()
    assert errors == []
    return taken


def test_concurrent_claimers_never_get_the_same_job():
    """Eight threads, each with its own connection, claim until the queue is empty."""
    jobs = Job.enqueue_many("noop", [{}] * 300)
    taken = claim_in_threads(8)
    every = [pk for part in taken for pk in part]
    assert len(every) == len(set(every)) == 300
    assert set(every) == {j.pk for j in jobs}
    assert sum(1 for part in taken if part) > 1  # the work really was shared


def test_concurrent_claimers_of_several_queues_never_get_the_same_job():
    """Two claimers given the same two queues, claiming until those are empty: every job of
    those queues is claimed once, the third queue's are left."""
    for queue in ("a", "b", "c"):
        Job.enqueue_many("noop", [{}] * 150, queue=queue)
    taken = claim_in_threads(2, queues=["a", "b"])
    every = [pk for part in taken for pk in part]
    assert len(every) == len(set(every)) == 300
    assert set(every) == set(Job.objects.filter(queue__in=["a", "b"]).values_list("pk", flat=True))
    assert set(Job.objects.ready().values_list("queue", flat=True)) == {"c"}


def free_ready_rows() -> set[int]:
    """The pending rows no transaction holds a lock on, as another connection sees them."""
    found: list[set[int]] = []

    def read():
        try:
            with transaction.atomic(), connections["default"].cursor() as cursor:
                cursor.execute("SELECT id FROM django_jobs_job WHERE status = %s "
                               "FOR UPDATE SKIP LOCKED", [S.PENDING])
                found.append({row[0] for row in cursor.fetchall()})
        finally:
            connections.close_all()

    thread = threading.Thread(target=read)
    thread.start()
    thread.join()
    return found[0]


@requires_postgres
def test_a_claim_from_several_queues_locks_one_row_of_each_other_queue_at_most():
    """The claim merges one walk per queue and locks the rows it passes: beyond the rows it
    takes it may hold the next row of each other queue until its transaction ends, no more.
    Another connection sees which ready rows are locked."""
    for queue in ("a", "b", "c"):
        Job.enqueue_many("noop", [{}] * 20, queue=queue)
    with transaction.atomic():
        got = claim(limit=5, queues=["a", "b", "c"])
        ready = set(Job.objects.ready().values_list("pk", flat=True))
        held = ready - free_ready_rows()
    assert len(got) == 5 and len(ready) == 55
    assert 0 < len(held) <= 2


@pytest.mark.skipif(os.environ.get("DJANGO_JOBS_TEST_DB", "sqlite") != "mariadb",
                    reason="MariaDB's claim (django_jobs/engine/mariadb/schema.py)")
def test_a_claim_from_several_queues_on_mariadb_locks_only_candidates_of_those_queues():
    """MariaDB's claim reads a few claims' worth of candidates of its queues without locks and
    locks those (``locks.lock_ready``): until its transaction ends it may hold the
    candidates it did not take, never a row beyond them or of a queue it was not given."""
    for queue in ("a", "b", "c"):
        Job.enqueue_many("noop", [{}] * 20, queue=queue)
    with transaction.atomic():
        got = claim(limit=5, queues=["a", "b"])
        ready = set(Job.objects.ready().values_list("pk", flat=True))
        held = ready - free_ready_rows()
    assert len(got) == 5 and len(ready) == 55
    assert 0 < len(held) <= 5 * (CANDIDATES_PER_SLOT - 1)
    assert set(Job.objects.filter(pk__in=held).values_list("queue", flat=True)) <= {"a", "b"}


def test_expired_lease_is_rescued_as_a_lost_attempt_and_retried():
    job = Job.enqueue("echo")
    claim(lease_seconds=30)
    Job.objects.filter(pk=job.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
    rescued = Job.objects.rescue()
    assert [j.pk for j in rescued] == [job.pk]
    job.refresh_from_db()
    assert job.status == S.FAILED and job.error["type"] == "WorkerLost"
    assert "w1" in job.error["message"]
    (attempt,) = job.attempts.all()
    assert attempt.outcome == JobAttempt.Outcome.LOST and attempt.number == 1
    assert Job.objects.rescue() == []  # idempotent


def test_a_rescue_since_a_time_looks_only_at_the_leases_that_ran_out_from_then_on():
    job = Job.enqueue("echo")
    claim(lease_seconds=30)
    ran_out = timezone.now() - timedelta(seconds=10)
    Job.objects.filter(pk=job.pk).update(leased_until=ran_out)
    assert Job.objects.rescue(since=ran_out + timedelta(microseconds=1)) == []
    assert Job.objects.get(pk=job.pk).status == S.PROCESSING
    assert [j.pk for j in Job.objects.rescue(since=ran_out)] == [job.pk]


def test_a_heartbeat_with_nothing_to_rescue_or_release_reads_once_each_and_locks_nothing():
    """rescue and the dependency sweep run on every heartbeat of every worker: when there is
    nothing to do they are one plain read each, outside any transaction."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    Job.enqueue("echo")
    claim(lease_seconds=30)  # processing, lease still good
    with CaptureQueriesContext(connection) as queries:
        assert Job.objects.rescue() == []
        assert Job.objects.release_waiting() == 0
    assert len(queries) == 2
    assert not any("FOR UPDATE" in q["sql"].upper() for q in queries)
    assert connection.get_autocommit()


def test_lost_attempt_on_last_try_does_not_spend_it():
    job = Job.enqueue("echo", max_attempts=1)
    claim()
    Job.objects.filter(pk=job.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
    Job.objects.rescue()
    job.refresh_from_db()
    assert (job.status, job.attempt, job.max_attempts, job.crashes) == (S.FAILED, 1, 2, 1)
    assert job.error["details"] == {"crashes": 1, "max_crashes": 3, "alone": True}


@override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "ON_CRASH": "fail"})
def test_lost_attempt_on_last_try_buries_the_job_when_crashes_count_as_failures():
    job = Job.enqueue("echo", max_attempts=1)
    claim()
    Job.objects.filter(pk=job.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
    Job.objects.rescue()
    job.refresh_from_db()
    assert (job.status, job.max_attempts, job.crashes) == (S.DEAD, 1, 1)
    assert job.error["type"] == "WorkerLost"


@pytest.mark.parametrize(("crashes", "others", "expected"), [
    (0, 0, "failed"),  # a first crash, alone: retried
    (1, 1, "failed"),  # a third crash would be the last, but it was shared: retried
    (2, 1, "failed"),  # shared, and already past max_crashes: still never buried for it
    (2, 0, "dead"),  # the third crash (max_crashes 3), alone in its worker: quarantined
])
def test_quarantine_only_for_a_crash_the_job_was_alone_in(crashes, others, expected):
    job = Job.enqueue("echo", max_attempts=5)
    neighbours = [Job.enqueue("echo", priority="low") for _ in range(others)]
    claim(limit=1 + others)
    Job.objects.filter(pk=job.pk).update(crashes=crashes)
    stale = timezone.now() - timedelta(seconds=1)
    Job.objects.filter(pk__in=[job.pk, *(j.pk for j in neighbours)]).update(leased_until=stale)
    Job.objects.rescue()
    job.refresh_from_db()
    assert (job.status, job.crashes) == (expected, crashes + 1)
    if expected == "dead":
        assert job.error["type"] == "Quarantined"
        assert job.error["message"].startswith("killed its worker 3 times (max_crashes 3)")


def test_late_worker_cannot_overwrite_a_newer_attempt():
    job = Job.enqueue("echo")
    (old,) = claim(worker_id="slow")
    Job.objects.filter(pk=job.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
    Job.objects.rescue()
    Job.objects.filter(pk=job.pk).run_now()
    (new,) = claim(worker_id="fresh")
    assert new.lease_token != old.lease_token
    assert Job.objects.finish([completed(old)]) == []  # fenced: dropped
    job.refresh_from_db()
    assert job.status == S.PROCESSING and job.worker_id == "fresh"
    assert [o.job.pk for o in Job.objects.finish([completed(new)])] == [job.pk]
    job.refresh_from_db()
    assert job.status == S.COMPLETED and job.attempt == 2


def test_heartbeat_renews_held_leases_and_reports_cancel_requests():
    a, b = Job.enqueue("echo"), Job.enqueue("echo")
    held = {j.pk: j.lease_token for j in claim(lease_seconds=1)}
    Job.objects.filter(pk=b.pk).cancel()
    still, cancel = Job.objects.heartbeat(held=held, lease_seconds=60)
    assert still == {a.pk, b.pk} and cancel == {b.pk}
    assert Job.objects.get(pk=a.pk).leased_until > timezone.now() + timedelta(seconds=50)
    stolen = {a.pk: held[a.pk], 999999: held[a.pk]}
    assert Job.objects.heartbeat(held=stolen, lease_seconds=60)[0] == {a.pk}


def test_heartbeat_renews_a_lease_only_while_its_job_is_processing_under_its_token():
    """The renewal is fenced on each job's own token: a wrong token, another held job's token,
    or a job no longer processing (finished, keeping its token) is not renewed or held."""
    for _ in range(5):
        Job.enqueue("echo")
    first, second = claim(limit=3, lease_seconds=1), claim(limit=2, lease_seconds=1)
    (a, b, c), (d, e) = first, second
    Job.objects.finish([completed(c)])
    held = {a.pk: a.lease_token, b.pk: e.lease_token, c.pk: c.lease_token,
            d.pk: a.lease_token, e.pk: uuid.uuid4()}
    before = dict(Job.objects.values_list("pk", "leased_until"))
    still, cancel = Job.objects.heartbeat(held=held, lease_seconds=60)
    assert (still, cancel) == ({a.pk}, set())
    after = dict(Job.objects.values_list("pk", "leased_until"))
    assert [pk for pk in after if after[pk] != before[pk]] == [a.pk]
    assert after[a.pk] > timezone.now() + timedelta(seconds=50)


def test_release_hands_back_without_spending_the_attempt():
    job = Job.enqueue("echo")
    (held,) = claim()
    assert Job.objects.release([held]) == 1
    job.refresh_from_db()
    assert job.status == S.PENDING and job.attempt == 0 and job.leased_until is None
    assert job.attempts.get().outcome == JobAttempt.Outcome.RELEASED
    (again,) = claim()
    assert again.attempt == 1


@override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "ON_CRASH": "fail"})  # lost: dead
def test_retry_makes_dead_failed_and_canceled_jobs_pending_and_keeps_history():
    dead = Job.enqueue("echo", max_attempts=1)
    claim()
    Job.objects.filter(pk=dead.pk).update(leased_until=timezone.now() - timedelta(seconds=1))
    Job.objects.rescue()
    done = Job.enqueue("echo")
    Job.objects.finish([completed(j) for j in claim()])
    canceled = Job.enqueue("echo")
    canceled.cancel()
    assert Job.objects.all().retry() == 2  # the completed one is left alone
    dead.refresh_from_db()
    assert dead.status == S.PENDING and dead.max_attempts == 2  # one more try at least
    assert dead.attempts.count() == 1
    assert Job.objects.get(pk=done.pk).status == S.COMPLETED
    assert Job.objects.get(pk=canceled.pk).status == S.PENDING


def test_dead_queryset_retry_and_model_retry():
    job = Job.enqueue("echo")
    Job.objects.filter(pk=job.pk).update(status=S.DEAD)
    assert Job.objects.dead().count() == 1
    assert job.retry() is True and job.status == S.PENDING
    assert job.retry() is False


def test_cancel_applies_to_pending_and_failed_and_requests_stop_of_processing():
    pending = Job.enqueue("echo")
    failed = Job.enqueue("echo")
    Job.objects.filter(pk=failed.pk).update(status=S.FAILED)
    running = Job.enqueue("echo")
    Job.objects.filter(pk=running.pk).update(status=S.PROCESSING)
    done = Job.enqueue("echo")
    Job.objects.filter(pk=done.pk).update(status=S.COMPLETED)
    assert Job.objects.all().cancel() == 3
    assert Job.objects.get(pk=pending.pk).status == S.CANCELED
    assert Job.objects.get(pk=failed.pk).status == S.CANCELED
    running.refresh_from_db()
    assert running.status == S.PROCESSING and running.cancel_requested
    assert Job.objects.get(pk=done.pk).status == S.COMPLETED


def test_run_now_makes_a_scheduled_job_due():
    job = Job.enqueue("echo", delay=3600)
    assert claim() == []
    assert job.run_now() is True
    assert [j.pk for j in claim()] == [job.pk]


@pytest.mark.parametrize(("queues", "index"), [
    (["default"], "django_jobs_ready_idx"),  # a worker given --queues
    (None, "django_jobs_ready_any_idx"),     # a worker of all queues
])
def test_claim_query_is_served_by_a_partial_ready_index(queues, index):
    """The claim statement the worker runs on PostgreSQL reads a partial ready index in order,
    so finished rows cost nothing and no claim sorts. It is checked as the worker runs it: a
    prepared statement under its generic plan, the plan PostgreSQL keeps when it stops
    planning the statement on every call (it keeps it only if it is no worse)."""
    import re
    import uuid

    from django.db import connection

    from django_jobs.core.states import READY_STATES
    from django_jobs.engine.postgres import engine as postgres

    if connection.vendor != "postgresql":
        pytest.skip("partial index plans are checked on PostgreSQL")
    Job.enqueue_many("echo", [{}] * 50)
    now = timezone.now()
    values = {"lease_token": uuid.uuid4(), "leased_until": now, "worker_id": "w",
              "started_at": now, "updated_at": now}
    sql, params, _ = postgres.claim_statement(
        Job, values=values, ready_states=READY_STATES, now=now, queues=queues,
        exclude_queues=(), limit=10,
    )
    numbered = iter(range(1, len(params) + 1))
    prepared = re.sub("%s", lambda _: f"${next(numbered)}", sql)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("SET LOCAL plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE claim_plan AS {prepared}".replace("%", "%%"))
        cursor.execute(f"EXPLAIN EXECUTE claim_plan({', '.join(['%s'] * len(params))})",
                       params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
        cursor.execute("DEALLOCATE claim_plan")
    # on the partitioned table (migration 0028) the open partition's copy is ``<index>_open``
    assert re.search(rf"{index}(_open)? on", plan), plan
    assert "Sort" not in plan  # the index order is the claim order
