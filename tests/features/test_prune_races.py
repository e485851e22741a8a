"""Pruning (and the admin's delete) and the enqueue of a dependent, racing: however their
transactions interleave, a dead or canceled job a waiting job depends on is never deleted, and
pruning keeps a completed one while a job that depends on it has not ended (it may still read
its result).

The enqueue of a job with ``depends_on`` locks its dependencies until it commits (``FOR KEY
SHARE`` on PostgreSQL, ``LOCK IN SHARE MODE`` on MariaDB), and a prune batch reads its filter
again once its rows are locked. So an enqueue still open keeps a pruner off its dependency; a
pruner that locked the dependency first makes the enqueue wait, and then refuse it (no such
job); an enqueue that committed between the pruner's read and its lock is seen by the second
read. SQLite has one writer at a time: there the two cannot overlap, and only the outcomes are
tested.
"""

import threading
import time
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from django_jobs.exceptions import InvalidJob
from django_jobs.features.dependency_results import dependency_results
from django_jobs.features.retention import prunable, prune
from django_jobs.models import Job, JobDependency
from tests.conftest import wait_for
from tests.partitioned import in_thread

from .test_control import run_once
from .test_dependency_outcomes import dependency, status_of

pytestmark = pytest.mark.django_db(transaction=True)
EVERYTHING = {"completed": timedelta(0), "dead": timedelta(0), "canceled": timedelta(0)}
ROW_LOCKS = pytest.mark.skipif("connection.vendor == 'sqlite'",
                               reason="SQLite has one writer at a time: no race to run")


def depended_on_before(status: str) -> Job:
    """A job in ``status`` that had a dependent, since canceled: flagged ``has_dependents``,
    and nothing waits on it, so pruning may take it."""
    job = dependency(status)
    earlier = Job.enqueue("echo", depends_on=[job])
    if earlier.status == "waiting":
        assert earlier.cancel()
    assert Job.objects.get(pk=job.pk).has_dependents
    return job


def lock_waits() -> int:
    """How many sessions of the test database wait on a lock."""
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                           " current_database() AND wait_event_type = 'Lock'")
        else:
            # A statement of another session that has not ended (the holder of the lock is
            # idle in its transaction): MariaDB 10.11 lists no InnoDB lock wait for it.
            cursor.execute("SELECT count(*) FROM information_schema.PROCESSLIST WHERE"
                           " COMMAND = 'Query' AND ID <> CONNECTION_ID() AND DB = DATABASE()")
        return cursor.fetchone()[0]


def held_open(work):
    """``work`` in a transaction of its own, held open until the returned ``commit()``."""
    done, commit = threading.Event(), threading.Event()

    def run():
        with transaction.atomic():
            result = work()
            done.set()
            assert commit.wait(30)
        return result

    thread, out = in_thread(run)
    assert done.wait(30), out

    def finish():
        commit.set()
        thread.join(30)
        if "error" in out:
            raise out["error"]
        return out["result"]

    return finish


@ROW_LOCKS
@pytest.mark.parametrize("status", ["dead", "canceled"])
def test_prunejobs_keeps_a_dependency_whose_dependents_enqueue_is_still_open(status):
    unmet = depended_on_before(status)
    commit = held_open(lambda: Job.enqueue("echo", depends_on=[unmet]))
    out = StringIO()
    call_command("prunejobs", "--completed", "never", f"--{status}", "0", stdout=out)
    dependent = commit()
    assert status_of(unmet) == status  # kept: the open enqueue held it
    assert status_of(dependent) == "waiting"
    assert JobDependency.objects.get(job=dependent).depends_on_id == unmet.pk
    # Once the dependent is gone, the next pass takes it.
    assert dependent.cancel()
    assert prune(EVERYTHING, now=timezone.now() + timedelta(days=1))[status] >= 1
    assert not Job.objects.filter(pk=unmet.pk).exists()


@ROW_LOCKS
def test_a_dependents_enqueue_waits_for_a_prune_that_locked_its_dependency_then_refuses():
    unmet = depended_on_before("dead")
    commit = held_open(lambda: prunable("dead", timedelta(0)).delete_batch(100))
    enqueue_thread, enqueued = in_thread(lambda: Job.enqueue("echo", depends_on=[unmet]))
    try:
        wait_for(lambda: lock_waits() >= 1 or not enqueue_thread.is_alive(), timeout=10)
        assert enqueue_thread.is_alive(), f"the enqueue did not wait: {enqueued}"
    finally:
        assert commit() == 1
        enqueue_thread.join(30)
    assert isinstance(enqueued.get("error"), InvalidJob), enqueued
    assert "no such job" in str(enqueued["error"])
    assert not Job.objects.filter(status="waiting").exists()
    assert not JobDependency.objects.filter(depends_on_id=unmet.pk).exists()


@ROW_LOCKS
def test_the_admins_delete_waits_for_an_open_enqueue_of_a_dependent_then_keeps_the_job():
    """The admin's delete locks the selected rows (it waits for the open enqueue's lock),
    then reads its selection again: the new waiting dependent keeps its dependency."""
    from django_jobs.admin.actions import delete_result

    unmet = depended_on_before("dead")
    commit = held_open(lambda: Job.enqueue("echo", depends_on=[unmet]))
    delete_thread, deleted = in_thread(lambda: delete_result(Job.objects.filter(pk=unmet.pk)))
    try:
        wait_for(lambda: lock_waits() >= 1 or not delete_thread.is_alive(), timeout=10)
        assert delete_thread.is_alive(), f"the delete did not wait: {deleted}"
    finally:
        dependent = commit()
        delete_thread.join(30)
    assert deleted["result"][0] == 0, deleted
    assert status_of(unmet) == "dead"
    assert JobDependency.objects.get(job=dependent).depends_on_id == unmet.pk


@pytest.mark.skipif("connection.vendor != 'postgresql'",
                    reason="pauses a statement between its snapshot and its lock by row-level "
                           "security, PostgreSQL's")
@pytest.mark.parametrize("first", [True, False], ids=["first-dependent", "another-dependent"])
def test_a_prune_batch_reads_again_what_committed_between_its_read_and_its_lock(first):
    """The batch's locking read is paused at the dependency's row after it took its
    snapshot; a dependent's enqueue commits meanwhile (the job's first dependent, which flags
    it, or another); the batch then locks the row, and its delete must see the new
    dependent."""
    from tests.partitioned import paused_claims

    unmet = dependency("dead") if first else depended_on_before("dead")
    with paused_claims(unmet) as pause:
        pause.start(lambda: prunable("dead", timedelta(0)).delete_batch(100))
        dependent = Job.enqueue("echo", depends_on=[unmet])
        assert pause.resume() == 0
    assert status_of(unmet) == "dead"
    assert JobDependency.objects.get(job=dependent).depends_on_id == unmet.pk


@ROW_LOCKS
def test_a_workers_pruning_keeps_a_dependency_whose_dependents_enqueue_is_open(start_worker):
    """A real worker prunes every 0.2 s with every age 0: it deletes another dead job (so its
    passes ran) and not the one an open enqueue depends on."""
    unmet = depended_on_before("dead")
    other = dependency("dead")
    commit = held_open(lambda: Job.enqueue("echo", depends_on=[unmet]))
    extra = ('{"PRUNE_INTERVAL": 0.2, "RETENTION": {"completed": 0, "dead": 0, '
             '"canceled": 0}}')
    worker = start_worker("--heartbeat", "0.1", "--lease", "5", "--queues", "idle",
                          env={"DJANGO_JOBS_TEST_EXTRA": extra})
    try:
        wait_for(lambda: not Job.objects.filter(pk=other.pk).exists(), timeout=60)
        time.sleep(1)  # a few more passes
        assert status_of(unmet) == "dead"
    finally:
        dependent = commit()
    assert JobDependency.objects.get(job=dependent).depends_on_id == unmet.pk
    assert "Traceback" not in worker.output()


def test_a_completed_dependency_is_kept_while_its_dependent_may_read_its_result():
    early, late = Job.enqueue("echo", {"n": "early"}), Job.enqueue("echo", {"n": "late"})
    dependent = Job.enqueue("read_dependencies", depends_on={"early": early, "late": late})
    run_once(early)
    later = timezone.now() + timedelta(days=1)
    assert prune(EVERYTHING, now=later)["completed"] == 0  # the dependent waits on late
    run_once(late)
    assert status_of(dependent) == "pending"
    assert prune(EVERYTHING, now=later)["completed"] == 0  # and has not run yet
    assert dependency_results(Job.objects.get(pk=dependent.pk))["early"] == {"echo": {"n": "early"}}
    out = StringIO()
    call_command("prunejobs", "--completed", "0", "--dead", "never", "--canceled", "never",
                 stdout=out)
    assert "kept 2 an unfinished job depends on" in out.getvalue()
    run_once(dependent)
    assert status_of(dependent) == "completed"
    # Its dependents ended: the dependencies go (and then the dependent).
    assert prune(EVERYTHING, now=later)["completed"] == 3


@pytest.mark.skipif("connection.vendor != 'postgresql'", reason="PgBouncer is PostgreSQL's")
@pytest.mark.slow
def test_behind_pgbouncer_in_transaction_mode_the_races_go_the_same_way(start_worker):
    """Every connection (the test's, its threads', the worker's) through a real PgBouncer in
    transaction mode: the enqueue's lock lives in its transaction, whatever server session
    PgBouncer lends it."""
    from tests.pgbouncer import default_through, pgbouncer

    with pgbouncer("transaction") as bouncer, default_through(bouncer):
        unmet = depended_on_before("dead")
        other = dependency("dead")
        commit = held_open(lambda: Job.enqueue("echo", depends_on=[unmet]))
        extra = ('{"PRUNE_INTERVAL": 0.2, "RETENTION": {"completed": 0, "dead": 0, '
                 '"canceled": 0}}')
        worker = start_worker("--heartbeat", "0.1", "--lease", "5", "--queues", "idle",
                              env={"DJANGO_JOBS_TEST_EXTRA": extra, **bouncer.env()})
        try:
            wait_for(lambda: not Job.objects.filter(pk=other.pk).exists(), timeout=60)
            assert status_of(unmet) == "dead"
        finally:
            dependent = commit()
        assert JobDependency.objects.get(job=dependent).depends_on_id == unmet.pk
        assert "Traceback" not in worker.output()
        worker.stop()
        # A prune that locked the dependency first: the enqueue waits, then is refused.
        assert dependent.cancel()
        commit = held_open(lambda: prunable("dead", timedelta(0)).delete_batch(100))
        enqueue_thread, enqueued = in_thread(lambda: Job.enqueue("echo", depends_on=[unmet]))
        try:
            wait_for(lambda: lock_waits() >= 1 or not enqueue_thread.is_alive(), timeout=10)
            assert enqueue_thread.is_alive(), f"the enqueue did not wait: {enqueued}"
        finally:
            assert commit() >= 1
            enqueue_thread.join(30)
        assert isinstance(enqueued.get("error"), InvalidJob), enqueued
