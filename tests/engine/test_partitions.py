"""The partitioned jobs table on PostgreSQL (migration 0028, ``engine/postgres/partitions.py``):
its layout after ``migrate``, a finished job in its day's partition with its attempts, a retry
back to the open partition waking a worker, a day's partitions dropped with the dependency links
left as Django's delete leaves them, a finish past the last day made on the kept shelf, the
claim planned on the open partition alone, and the migration on a populated table, run again
after an interruption. A day's drop keeps the jobs dependents need: when a dependent's enqueue
races it (directly and through PgBouncer in transaction mode), while its detach is pending,
when its own write fails, when two passes meet in it."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from contextlib import nullcontext
from datetime import UTC, date, timedelta
from pathlib import Path

import psycopg
import pytest
from django.db import connection, transaction

from django_jobs.core import clock
from django_jobs.core.shelves import KEPT_SHELF, OPEN_SHELF
from django_jobs.core.states import COMPLETED, DEAD, WAITING
from django_jobs.engine.postgres import day_drops, partitions
from django_jobs.features.dependencies import waited_on
from django_jobs.models import Job, JobAttempt, JobDependency
from tests.conftest import requires_postgres
from tests.engine.test_wakeups import waiters  # noqa: F401 (a fixture)
from tests.helpers import claim, run_until_settled
from tests.partitioned import in_thread, wait_until_blocked
from tests.pgbouncer import default_through, pgbouncer

pytestmark = [requires_postgres, pytest.mark.django_db(transaction=True)]

ROOT = Path(__file__).resolve().parents[2]


def where(table: str, pk: int) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT tableoid::regclass::text FROM {table} WHERE id = %s", [pk])
        return cursor.fetchone()[0]


def today() -> date:
    return clock.now("default").astimezone(UTC).date()


def test_migrate_makes_partitioned_parents_with_the_triggers_and_no_foreign_key_to_jobs():
    with connection.cursor() as cursor:
        for table in partitions.TABLES:
            cursor.execute("SELECT relkind FROM pg_class WHERE oid = %s::regclass", [table])
            assert cursor.fetchone()[0] == "p"
            days = partitions.attached_days(cursor, table)
            assert max(days) == partitions.read_last_day("default")
            assert all(day + timedelta(days=1) in days for day in days if day < max(days))
            cursor.execute("SELECT count(*) FROM pg_inherits WHERE inhparent = %s::regclass "
                           "AND inhrelid IN (to_regclass(%s), to_regclass(%s))",
                           [table, f"{table}_open", f"{table}_kept"])
            assert cursor.fetchone()[0] == 2
        cursor.execute("SELECT tgname FROM pg_trigger WHERE tgrelid = 'django_jobs_job'::regclass "
                       "AND NOT tgisinternal ORDER BY 1")
        assert [r[0] for r in cursor.fetchall()] == [
            "django_jobs_insert_notify", "django_jobs_moved_notify", "django_jobs_pending_notify"]
        cursor.execute("SELECT count(*) FROM pg_constraint WHERE contype = 'f' AND confrelid IN "
                       "('django_jobs_job'::regclass, 'django_jobs_jobattempt'::regclass)")
        assert cursor.fetchone()[0] == 0
    assert partitions.wanted_last_day(today(), [timedelta(days=30)]) <= \
        partitions.read_last_day("default")


def test_a_finished_job_and_its_attempts_land_in_their_days_partition():
    job = run_until_settled(Job.enqueue("noop"))
    assert job.status == COMPLETED and job.shelf > today()
    name = partitions.day_name(partitions.JOBS, job.shelf)
    assert where("django_jobs_job", job.pk) == name
    attempts = JobAttempt.objects.filter(job=job)
    assert attempts.exists()
    for attempt in attempts:
        assert where("django_jobs_jobattempt", attempt.pk) == partitions.day_name(
            partitions.ATTEMPTS, job.shelf)
    pending = Job.enqueue("noop", delay=3600)
    assert where("django_jobs_job", pending.pk) == "django_jobs_job_open"


def test_a_retried_dead_job_moves_back_to_the_open_partition_and_wakes_a_worker(waiters):  # noqa: F811
    dead = run_until_settled(Job.enqueue("always_fails"))
    assert dead.status == DEAD
    assert where("django_jobs_job", dead.pk) == partitions.day_name(partitions.JOBS, dead.shelf)
    (waiter,) = waiters(1)
    assert Job.objects.filter(pk=dead.pk).retry() == 1
    assert where("django_jobs_job", dead.pk) == "django_jobs_job_open"
    assert Job.objects.get(pk=dead.pk).shelf == OPEN_SHELF
    assert waiter.heard() == [(waiter.channel, "default")]
    assert [job.pk for job in claim(5)] == [dead.pk]


def test_a_finish_past_the_last_day_made_goes_to_the_kept_shelf():
    last = partitions.read_last_day("default")
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {partitions.DAYS} SET last_day = %s", [today()])
    partitions.forget()
    try:
        job = run_until_settled(Job.enqueue("noop"))  # its day (a week on) has a partition
        assert job.shelf == KEPT_SHELF
        assert where("django_jobs_job", job.pk) == "django_jobs_job_kept"
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f"UPDATE {partitions.DAYS} SET last_day = %s", [last])
        partitions.forget()


def test_pruning_a_day_drops_its_partitions_and_leaves_the_links_as_a_delete_would():
    day = today() + timedelta(days=1)
    done = run_until_settled(Job.enqueue("noop"))
    dead = run_until_settled(Job.enqueue("always_fails"))
    gone = run_until_settled(Job.enqueue("always_fails"))
    after_done = Job.enqueue("noop", depends_on=[done])
    waits = Job.enqueue("noop", depends_on=[dead])
    assert Job.objects.get(pk=waits.pk).status == WAITING
    finished_dependent = Job.enqueue("noop", depends_on=[gone])
    Job.objects.filter(pk=finished_dependent.pk).update(status="canceled")
    # a completed dependency goes once its dependents have finished (they read its result)
    Job.objects.filter(pk=after_done.pk).update(status="completed")
    moved = [done.pk, dead.pk, gone.pk]
    Job.objects.filter(pk__in=moved).update(shelf=day)
    JobAttempt.objects.filter(job_id__in=moved).update(shelf=day)
    try:
        done_counts = day_drops.upkeep("default", day, [timedelta(days=7)], waited_on(), 100)
        assert done_counts is not None and done_counts["dropped"] >= 1
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s), to_regclass(%s)", [
                partitions.day_name(partitions.JOBS, day),
                partitions.day_name(partitions.ATTEMPTS, day)])
            assert cursor.fetchone() == (None, None)
        # the dead job a waiting job depends on moved to the next day, with its attempts
        kept = Job.objects.get(pk=dead.pk)
        assert kept.shelf == day + timedelta(days=1)
        assert set(JobAttempt.objects.filter(job=kept).values_list("shelf", flat=True)) == {
            kept.shelf}
        assert not Job.objects.filter(pk__in=[done.pk, gone.pk]).exists()
        assert not JobAttempt.objects.filter(job_id__in=[done.pk, gone.pk]).exists()
        links = {link.job_id: (link.depends_on_id, link.deleted_status)
                 for link in JobDependency.objects.all()}
        assert links == {after_done.pk: (None, COMPLETED), waits.pk: (dead.pk, ""),
                         finished_dependent.pk: (None, DEAD)}
    finally:
        for again in (today(), day):  # for the tests after this one
            partitions.make_day("default", again)


def test_the_claim_naming_the_open_shelf_is_planned_on_the_open_partition_alone():
    with connection.cursor() as cursor:
        cursor.execute(
            "EXPLAIN SELECT id FROM django_jobs_job WHERE status IN ('pending', 'failed') "
            "AND run_at <= now() AND shelf = DATE '1000-01-01' "
            "ORDER BY priority DESC, run_at, id LIMIT 10 FOR UPDATE SKIP LOCKED")
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "django_jobs_job_open" in plan
    assert "django_jobs_job_kept" not in plan and "django_jobs_job_2" not in plan


UPGRADE_DB = f"test_django_jobs_upgrade{os.environ.get('DJANGO_JOBS_TEST_SUFFIX', '')}"


def manage(*args: str) -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "JOBS_DB_NAME": UPGRADE_DB}
    subprocess.run([sys.executable, "-m", "django", *args], cwd=ROOT, env=env, check=True,
                   capture_output=True)


@pytest.fixture
def upgrade_db():
    params = {**connection.get_connection_params(), "dbname": "postgres"}
    with psycopg.connect(**params, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {UPGRADE_DB}")
        admin.execute(f"CREATE DATABASE {UPGRADE_DB}")
    try:
        with psycopg.connect(**{**params, "dbname": UPGRADE_DB}, autocommit=True) as conn:
            yield conn
    finally:
        with psycopg.connect(**params, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {UPGRADE_DB} WITH (FORCE)")


def test_the_migration_on_a_populated_table_run_again_after_an_interruption(upgrade_db):
    conn = upgrade_db
    manage("migrate", "django_jobs", "0027", "-v0")
    later = date.today() + timedelta(days=20)  # D the day after; days made from D on
    conn.execute("""
        INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue, run_at,
            attempt, max_attempts, created_at, updated_at, finished_at, worker_id,
            cancel_requested, callback_url, has_dependents, crashes, shelf)
        SELECT 'j' || g, 'noop', '{}', CASE g %% 3 WHEN 0 THEN 'pending' ELSE 'completed' END,
            0, 'default', now(), 1, 3, now(), now(),
            CASE g %% 3 WHEN 0 THEN NULL ELSE now() END, 'w', false, '', false, 0,
            CASE g %% 3 WHEN 0 THEN DATE '1000-01-01' WHEN 1 THEN %s ELSE DATE '9999-12-31' END
        FROM generate_series(1, 3000) g""", [later])
    conn.execute("INSERT INTO django_jobs_jobattempt (job_id, number, worker_id, started_at, "
                 "finished_at, outcome, shelf) SELECT id, 1, 'w', now(), now(), status, shelf "
                 "FROM django_jobs_job WHERE status = 'completed'")
    # An interrupted run: its guard and check for another day, and a unique index that a
    # CREATE INDEX CONCURRENTLY left invalid.
    conn.execute("ALTER TABLE django_jobs_job ADD CONSTRAINT django_jobs_job_below_d "
                 "CHECK (shelf < DATE '9999-01-01') NOT VALID")
    with pytest.raises(psycopg.errors.UniqueViolation):
        conn.execute("CREATE UNIQUE INDEX CONCURRENTLY django_jobs_job_pkey_s "
                     "ON django_jobs_job ((id % 2), shelf)")
    manage("migrate", "django_jobs", "-v0")

    rows = conn.execute("SELECT tableoid::regclass::text, shelf, count(*) FROM django_jobs_job "
                        "GROUP BY 1, 2 ORDER BY 1, 2").fetchall()
    assert rows == [("django_jobs_job_open", date(1000, 1, 1), 2000),
                    ("django_jobs_job_open", later, 1000)]
    assert conn.execute("SELECT count(*) FROM django_jobs_jobattempt").fetchone()[0] == 2000
    assert conn.execute(
        "SELECT indisvalid, pg_get_indexdef(indexrelid) FROM pg_index WHERE indexrelid = "
        "'django_jobs_job_pkey_s'::regclass").fetchone() == (
        True, "CREATE UNIQUE INDEX django_jobs_job_pkey_s ON public.django_jobs_job_open "
              "USING btree (id, shelf)")
    bound = conn.execute("SELECT pg_get_expr(relpartbound, oid) FROM pg_class "
                         "WHERE relname = 'django_jobs_job_open'").fetchone()[0]
    assert bound == f"FOR VALUES FROM (MINVALUE) TO ('{later + timedelta(days=1)}')"
    days = conn.execute("SELECT last_day FROM django_jobs_shelf_days").fetchone()[0]
    assert days >= later + timedelta(days=1)
    # a new job through the parent takes the old sequence's next id; a finish lands on its day
    new = conn.execute("INSERT INTO django_jobs_job (public_id, type, payload, status, "
                       "priority, queue, run_at, attempt, max_attempts, created_at, updated_at, "
                       "worker_id, cancel_requested, callback_url, has_dependents, crashes) "
                       "VALUES ('new', 'noop', '{}', 'pending', 0, 'default', now(), 0, 3, "
                       "now(), now(), 'w', false, '', false, 0) RETURNING id").fetchone()[0]
    assert new == 3001
    conn.execute("UPDATE django_jobs_job SET status = 'completed', shelf = %s WHERE id = %s",
                 [later + timedelta(days=1), new])
    assert conn.execute("SELECT tableoid::regclass::text FROM django_jobs_job WHERE id = %s",
                        [new]).fetchone()[0] == partitions.day_name(
        partitions.JOBS, later + timedelta(days=1))
    # run again (as after an interruption past the swap): it only makes days ahead; the
    # migrations after it stand as they are
    manage("migrate", "django_jobs", "0027", "--fake", "-v0")
    manage("migrate", "django_jobs", "0029", "-v0")
    manage("migrate", "django_jobs", "--fake", "-v0")
    assert conn.execute("SELECT count(*) FROM django_jobs_job").fetchone()[0] == 3001


def test_a_prune_pass_makes_the_days_ahead_that_are_missing():
    from django_jobs.features.retention import configured_ages, prune_pass

    last = partitions.read_last_day("default")
    day_drops.detach_and_drop("default", last)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {partitions.DAYS} SET last_day = %s",
                       [last - timedelta(days=1)])
    partitions.forget()
    prune_pass(configured_ages())
    assert partitions.read_last_day("default") >= last
    with connection.cursor() as cursor:
        for table in partitions.TABLES:
            assert last in partitions.attached_days(cursor, table)


def test_the_batched_prune_leaves_to_the_drop_the_jobs_whose_day_goes_by_tomorrow():
    from django_jobs.features.retention import prune_pass

    tomorrow = today() + timedelta(days=1)
    with connection.cursor() as cursor:
        assert tomorrow in partitions.attached_days(cursor, partitions.JOBS)
    due, shortened = (run_until_settled(Job.enqueue("noop")) for _ in range(2))
    old = clock.now("default") - timedelta(days=8)  # past a 7-day age
    for job, shelf in ((due, tomorrow), (shortened, today() + timedelta(days=5))):
        Job.objects.filter(pk=job.pk).update(shelf=shelf, finished_at=old, created_at=old)
        JobAttempt.objects.filter(job_id=job.pk).update(shelf=shelf)

    counts, _ = prune_pass({"completed": timedelta(days=7)})

    # the one whose day goes by tomorrow is left to the drop; the other, whose day is further
    # out than its age now says, goes in batches
    assert counts["completed"] == 1
    assert list(Job.objects.values_list("pk", flat=True)) == [due.pk]
    assert where("django_jobs_job", due.pk) == partitions.day_name("django_jobs_job", tomorrow)

    counts, _ = prune_pass({"completed": timedelta(hours=1)})  # an age under a day: batched

    assert counts["completed"] == 1 and not Job.objects.exists()


def test_a_transaction_older_than_the_drop_holds_the_day_back_and_not_the_pass():
    day = today() + timedelta(days=1)
    # Today's partitions go first: in the first hour of a day a worker's pass has not dropped
    # them yet (DROP_GRACE), and the pass below would be held back on them, not on ``day``.
    day_drops.upkeep("default", today(), [timedelta(days=7)], waited_on(), 100)
    done = run_until_settled(Job.enqueue("noop"))
    Job.objects.filter(pk=done.pk).update(shelf=day)
    JobAttempt.objects.filter(job_id=done.pk).update(shelf=day)
    settings = connection.settings_dict
    report = psycopg.connect(host=settings["HOST"], port=settings["PORT"], user=settings["USER"],
                             dbname=settings["NAME"])
    passes: list = []
    try:
        # a report in REPEATABLE READ, its snapshot taken on the jobs table and held
        report.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        report.execute("SELECT count(*) FROM django_jobs_job")
        upkeep = threading.Thread(target=lambda: passes.append(day_drops.upkeep(
            "default", day, [timedelta(days=7)], waited_on(), 100)))
        upkeep.start()
        upkeep.join(timeout=60)
        assert not upkeep.is_alive(), "the pass waits on the open transaction"
        assert passes[0]["dropped"] == 0 and passes[0]["jobs"] == {}
        with connection.cursor() as cursor:
            cursor.execute("SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = "
                           "to_regclass(%s)", [partitions.day_name(partitions.JOBS, day)])
            assert cursor.fetchone() == (True,)  # hidden from queries begun since
        assert not Job.objects.filter(pk=done.pk).exists()
        report.rollback()
        would = day_drops.dropped_jobs("default", day, waited_on())  # the dry run's count

        again = day_drops.upkeep("default", day, [timedelta(days=7)], waited_on(), 100)

        assert again["dropped"] >= 1 and again["jobs"] == would == {"completed": 1}
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s), to_regclass(%s)", [
                partitions.day_name(partitions.JOBS, day),
                partitions.day_name(partitions.ATTEMPTS, day)])
            assert cursor.fetchone() == (None, None)
    finally:
        report.close()
        for made in (today(), day):  # for the tests after this one
            partitions.make_day("default", made)


def test_a_dry_run_counts_what_a_pass_deletes():
    from django_jobs.features.retention import prune, prune_pass

    old = clock.now("default") - timedelta(days=8)  # past a 7-day age
    tomorrow = today() + timedelta(days=1)
    dropped, due, shortened = (run_until_settled(Job.enqueue("noop")) for _ in range(3))
    held = run_until_settled(Job.enqueue("always_fails"))
    Job.enqueue("noop", depends_on=[held])  # waits on the dead job: it moves, not dropped
    # today's partition goes with a pass an hour into the day; tomorrow's is left to its drop;
    # a day further out than the age says goes in batches
    for job, shelf in ((dropped, today()), (held, today()), (due, tomorrow),
                       (shortened, today() + timedelta(days=5))):
        Job.objects.filter(pk=job.pk).update(shelf=shelf, finished_at=old, created_at=old)
        JobAttempt.objects.filter(job_id=job.pk).update(shelf=shelf)
    ages = {"completed": timedelta(days=7), "dead": timedelta(days=7)}
    try:
        would = prune(ages, dry_run=True)
        assert Job.objects.filter(pk__in=[dropped.pk, due.pk, shortened.pk]).count() == 3

        done, _ = prune_pass(ages)

        assert would == done and done["dead"] == 0
        assert Job.objects.filter(pk=due.pk).exists()  # counted by neither
    finally:
        partitions.make_day("default", today())


def test_a_day_whose_jobs_partition_went_and_attempts_partition_stayed_is_dropped_later():
    day = today() + timedelta(days=1)
    jobs_day = partitions.day_name(partitions.JOBS, day)
    try:
        with connection.cursor() as cursor:  # as a pass whose attempts' detach timed out
            cursor.execute(f"ALTER TABLE {partitions.JOBS} DETACH PARTITION {jobs_day}")
            cursor.execute(f"DROP TABLE {jobs_day}")

        done = day_drops.upkeep("default", day, [timedelta(days=7)], waited_on(), 100)

        assert done["dropped"] >= 1
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s)",
                           [partitions.day_name(partitions.ATTEMPTS, day)])
            assert cursor.fetchone() == (None,)
    finally:
        for made in (today(), day):  # for the tests after this one
            partitions.make_day("default", made)


def on_day(job: Job, day: date) -> None:
    Job.objects.filter(pk=job.pk).update(shelf=day)
    JobAttempt.objects.filter(job_id=job.pk).update(shelf=day)


def enqueue_held_open(dependency: Job) -> tuple[threading.Event, threading.Event, Callable]:
    """A dependent of ``dependency`` enqueued in a transaction of its own, held open until
    the second event is set; the third returns the thread's outcome once it ended."""
    enqueued, commit = threading.Event(), threading.Event()

    def enqueue() -> Job:
        with transaction.atomic():
            job = Job.enqueue("noop", depends_on=[dependency])
            enqueued.set()
            assert commit.wait(30)
        return job

    thread, out = in_thread(enqueue)
    assert enqueued.wait(10), out

    def outcome() -> Job:
        commit.set()
        thread.join(30)
        assert "error" not in out, out["error"]
        return out["result"]

    return enqueued, commit, outcome


def until_dropped(day: date) -> None:
    """Passes until ``day``'s partitions are gone (a detach left pending is finished)."""
    for _ in range(5):
        done = day_drops.upkeep("default", day, [timedelta(days=7)], waited_on(), 100)
        with connection.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s), to_regclass(%s)", [
                partitions.day_name(partitions.JOBS, day),
                partitions.day_name(partitions.ATTEMPTS, day)])
            if done is not None and cursor.fetchone() == (None, None):
                return
    raise AssertionError(f"the partitions of {day} were not dropped")


def retried_releases(dead: Job, dependent: Job) -> None:
    """The kept dead job is found, retried and completes; its dependent is released."""
    job = Job.objects.get(pk=dead.pk)
    assert job.status == DEAD
    assert Job.objects.get(pk=dependent.pk).status == WAITING
    Job.objects.filter(pk=job.pk).update(type="noop")  # it succeeds this time
    assert Job.objects.get(pk=job.pk).retry()
    assert run_until_settled(Job.objects.get(pk=job.pk)).status == COMPLETED
    assert run_until_settled(Job.objects.get(pk=dependent.pk)).status == COMPLETED


@pytest.mark.parametrize("route", ["direct", "transaction pooler"])
def test_a_dependent_enqueued_while_its_dead_dependencys_day_is_dropped_keeps_it(route):
    """The enqueue of a dependent is still open when the pass reads which of the day's jobs
    a waiting job depends on: the drop waits for it and reads again under its lock, so the
    dead dependency moves to the next day instead of going with the day (``settle``). The
    same through PgBouncer in transaction mode, where the detach is a plain one."""
    day = today() + timedelta(days=1)
    day_drops.upkeep("default", today(), [timedelta(days=7)], waited_on(), 100)
    dead = run_until_settled(Job.enqueue("always_fails"))
    on_day(dead, day)
    context = pgbouncer("transaction") if route == "transaction pooler" else nullcontext()
    try:
        with context as bouncer, (default_through(bouncer) if bouncer else nullcontext()):
            _, _, outcome = enqueue_held_open(dead)
            drop, out = in_thread(lambda: day_drops.upkeep(
                "default", day, [timedelta(days=7)], waited_on(), 100))
            wait_until_blocked()  # the detach waits for the enqueue's transaction
            dependent = outcome()
            drop.join(30)
            assert "error" not in out, out["error"]
            until_dropped(day)
        kept = Job.objects.get(pk=dead.pk)
        assert kept.shelf == day + timedelta(days=1)
        assert where("django_jobs_job", kept.pk) == partitions.day_name(
            partitions.JOBS, kept.shelf)
        assert set(JobAttempt.objects.filter(job=kept).values_list("shelf", flat=True)) == {
            kept.shelf}
        assert list(JobDependency.objects.filter(job=dependent).values_list(
            "depends_on_id", flat=True)) == [dead.pk]
        retried_releases(dead, dependent)
    finally:
        for made in (today(), day):  # for the tests after this one
            partitions.make_day("default", made)


def test_while_a_detach_is_pending_a_dead_job_a_dependent_waits_on_is_found_and_retried():
    """A report's transaction holds the detach of the day pending; a dependent of a dead job
    of that day commits meanwhile. The pass moves that job out of the hidden day
    (``keep_needed``): it is found and retried while the detach is pending, and the next pass,
    once the report ended, finishes the detach and drops the day without it."""
    day = today() + timedelta(days=1)
    day_drops.upkeep("default", today(), [timedelta(days=7)], waited_on(), 100)
    dead, gone = (run_until_settled(Job.enqueue("always_fails")) for _ in range(2))
    on_day(dead, day)
    on_day(gone, day)
    settings = connection.settings_dict
    report = psycopg.connect(host=settings["HOST"], port=settings["PORT"], user=settings["USER"],
                             dbname=settings["NAME"])
    try:
        report.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        report.execute("SELECT count(*) FROM django_jobs_job")
        _, _, outcome = enqueue_held_open(dead)
        drop, out = in_thread(lambda: day_drops.upkeep(
            "default", day, [timedelta(days=7)], waited_on(), 100))
        wait_until_blocked()
        dependent = outcome()  # committed while the detach waits for the report
        drop.join(30)
        assert "error" not in out, out["error"]
        assert out["result"]["dropped"] == 0
        with connection.cursor() as cursor:
            cursor.execute("SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = "
                           "to_regclass(%s)", [partitions.day_name(partitions.JOBS, day)])
            assert cursor.fetchone() == (True,)
        assert not Job.objects.filter(pk=gone.pk).exists()  # hidden with its day
        assert Job.objects.get(pk=dead.pk).shelf == day + timedelta(days=1)
        report.rollback()
        until_dropped(day)
        assert not Job.objects.filter(pk=gone.pk).exists()
        retried_releases(dead, dependent)
    finally:
        report.close()
        for made in (today(), day):  # for the tests after this one
            partitions.make_day("default", made)


def test_a_day_drop_whose_own_write_fails_loses_nothing_and_the_next_pass_finishes_it():
    """The move of a raced dependency out of the detached day fails (a trigger refuses its
    row): the pass raises, its transaction is rolled back whole, the detached day is still
    there with the job in it, and the next pass moves the job and drops the day."""
    day = today() + timedelta(days=1)
    day_drops.upkeep("default", today(), [timedelta(days=7)], waited_on(), 100)
    dead = run_until_settled(Job.enqueue("always_fails"))
    on_day(dead, day)
    jobs_day = partitions.day_name(partitions.JOBS, day)
    with connection.cursor() as cursor:
        cursor.execute("CREATE FUNCTION django_jobs_test_refuse() RETURNS trigger "
                       "LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused'; END $$")
        cursor.execute("CREATE TRIGGER django_jobs_test_refuse BEFORE INSERT ON django_jobs_job "
                       f"FOR EACH ROW WHEN (NEW.id = {dead.pk}) "
                       "EXECUTE FUNCTION django_jobs_test_refuse()")
    try:
        _, _, outcome = enqueue_held_open(dead)
        drop, out = in_thread(lambda: day_drops.upkeep(
            "default", day, [timedelta(days=7)], waited_on(), 100))
        wait_until_blocked()
        dependent = outcome()
        drop.join(30)
        assert "refused" in str(out.get("error")), out
        with connection.cursor() as cursor:
            assert day not in partitions.attached_days(cursor, partitions.JOBS)
            cursor.execute(f"SELECT id FROM {jobs_day}")
            assert cursor.fetchall() == [(dead.pk,)]
            cursor.execute("DROP TRIGGER django_jobs_test_refuse ON django_jobs_job")
        until_dropped(day)
        assert Job.objects.get(pk=dead.pk).shelf == day + timedelta(days=1)
        retried_releases(dead, dependent)
    finally:
        with connection.cursor() as cursor:
            cursor.execute("DROP TRIGGER IF EXISTS django_jobs_test_refuse ON django_jobs_job")
            cursor.execute("DROP FUNCTION IF EXISTS django_jobs_test_refuse()")
        for made in (today(), day):  # for the tests after this one
            partitions.make_day("default", made)


@pytest.mark.parametrize("route", ["direct", "transaction pooler"])
def test_two_passes_that_meet_in_a_day_drop_leave_it_to_one(route):
    """A second pass while the first one waits in the drop of a day (for a dependent's
    enqueue) makes and drops nothing: one session at a time holds the pass's lock, a
    session's directly, a transaction's through a transaction pooler."""
    day = today() + timedelta(days=1)
    day_drops.upkeep("default", today(), [timedelta(days=7)], waited_on(), 100)
    dead = run_until_settled(Job.enqueue("always_fails"))
    on_day(dead, day)
    context = pgbouncer("transaction") if route == "transaction pooler" else nullcontext()
    try:
        with context as bouncer, (default_through(bouncer) if bouncer else nullcontext()):
            _, _, outcome = enqueue_held_open(dead)
            first, out = in_thread(lambda: day_drops.upkeep(
                "default", day, [timedelta(days=7)], waited_on(), 100))
            wait_until_blocked()
            second = day_drops.upkeep("default", day, [timedelta(days=7)], waited_on(), 100)
            dependent = outcome()
            first.join(30)
            assert "error" not in out, out["error"]
            assert second is None
            until_dropped(day)
        assert Job.objects.get(pk=dead.pk).shelf == day + timedelta(days=1)
        retried_releases(dead, dependent)
    finally:
        for made in (today(), day):  # for the tests after this one
            partitions.make_day("default", made)


def test_a_completed_dependency_a_dependent_has_yet_to_read_is_kept_by_its_days_drop():
    """A completed job whose dependent has not run yet moves to the next day with its
    attempts, and the dependent reads its result; once no unfinished dependent needs it, the
    next day's drop takes it."""
    day = today() + timedelta(days=1)
    day_drops.upkeep("default", today(), [timedelta(days=7)], waited_on(), 100)
    done = run_until_settled(Job.enqueue("echo", {"n": 1}))
    on_day(done, day)
    reader = Job.enqueue("read_dependencies", depends_on={"source": done})
    try:
        until_dropped(day)
        kept = Job.objects.get(pk=done.pk)
        assert kept.shelf == day + timedelta(days=1)
        assert set(JobAttempt.objects.filter(job=kept).values_list("shelf", flat=True)) == {
            kept.shelf}
        read = run_until_settled(Job.objects.get(pk=reader.pk))
        assert read.status == COMPLETED
        assert read.result == {"source": {"result": kept.result}}
        assert day_drops.dropped_jobs("default", kept.shelf, waited_on()).get(COMPLETED) == 1
    finally:
        for made in (today(), day):  # for the tests after this one
            partitions.make_day("default", made)
