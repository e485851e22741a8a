"""The partitioned jobs table on PostgreSQL (migration 0028, ``engine/postgres/partitions.py``):
its layout after ``migrate``, a finished job in its day's partition with its attempts, a retry
back to the open partition waking a worker, a day's partitions dropped with the dependency links
left as Django's delete leaves them, a finish past the last day made on the kept shelf, the
claim planned on the open partition alone, and the migration on a populated table, run again
after an interruption."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from datetime import UTC, date, timedelta
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from django_jobs.core import clock
from django_jobs.core.shelves import KEPT_SHELF, OPEN_SHELF
from django_jobs.core.states import COMPLETED, DEAD, WAITING
from django_jobs.engine.postgres import day_drops, partitions
from django_jobs.features.dependencies import waited_on
from django_jobs.models import Job, JobAttempt, JobDependency
from tests.conftest import requires_postgres
from tests.engine.test_wakeups import waiters  # noqa: F401 (a fixture)
from tests.helpers import claim, run_until_settled

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
