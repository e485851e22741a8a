"""The finished jobs counted as the engine writes them (``engine/finish_counts.py``, ``JobStat``):
real workers' runs counted exactly, per minute, queue, type and outcome, with their waits and run
times; every write path (PostgreSQL's statement, its turn, the ORM's) counting the same; the counts
kept in the process until a flush (a worker's heartbeat, its stop) writes them."""

from __future__ import annotations

import json
import signal
from collections import Counter, defaultdict
from contextlib import contextmanager
from datetime import timedelta

import pytest
from django.db import DatabaseError, connection, transaction
from django.db.models import Sum
from django.test import TestCase, override_settings
from hypothesis import given
from hypothesis import strategies as st

from django_jobs.core import clock
from django_jobs.core.contract import ClaimRequest
from django_jobs.core.outcomes import AttemptOutcome, micros
from django_jobs.engine import engine_for, finish_counts
from django_jobs.engine.verbs import Engine
from django_jobs.models import Job, JobStat
from django_jobs.models.stats import HOUR, MINUTE, SUMMED, WAIT_BOUNDS_US, WAIT_FIELDS
from tests.conftest import requires_postgres, requires_row_locks, wait_for
from tests.helpers import claim, run_burst

US = timedelta(microseconds=1)


@contextmanager
def committed():
    """Counts are kept once a finish's transaction commits (``engine/finish_counts.py``); the test's
    own transaction never commits, so its steps on commit run at the block's end, and the
    counts kept are then written, as a worker's heartbeat writes them."""
    with TestCase.captureOnCommitCallbacks(execute=True):
        yield
    finish_counts.flush()


def minute(moment):
    return moment.replace(second=0, microsecond=0)


def counted(span: int = MINUTE) -> dict[tuple, dict[str, int]]:
    """The counts of one span summed over workers, by (start, queue, type, outcome)."""
    rows = (JobStat.objects.filter(span=span).values("bucket", "queue", "type", "outcome")
            .annotate(**{f"s_{name}": Sum(name) for name in SUMMED}).order_by())
    return {(r["bucket"], r["queue"], r["type"], r["outcome"]):
            {name: r[f"s_{name}"] for name in SUMMED} for r in rows}


def by_hour(minutes: dict[tuple, dict[str, int]]) -> dict[tuple, dict[str, int]]:
    """Minute counts summed into their hours."""
    out: dict[tuple, dict[str, int]] = defaultdict(lambda: dict.fromkeys(SUMMED, 0))
    for (start, *rest), sums in minutes.items():
        row = out[(start.replace(minute=0), *rest)]
        for name, value in sums.items():
            row[name] += value
    return dict(out)


def assert_hours_hold_the_minutes() -> None:
    assert counted(HOUR) == by_hour(counted(MINUTE))


def expected_wait_bucket(us: int) -> int:
    """The bucket a wait falls in, by reading the bounds one by one."""
    for i, bound in enumerate(WAIT_BOUNDS_US):
        if us <= bound:
            return i
    return len(WAIT_BOUNDS_US)


def expected_from_jobs(jobs, waits: dict[int, int]) -> dict[tuple, dict[str, int]]:
    """What the counts must hold for jobs that each ran one attempt: from the job rows (the
    minute of the finish's write is the job's ``updated_at``) and their attempt rows."""
    out: dict[tuple, dict[str, int]] = defaultdict(lambda: dict.fromkeys(SUMMED, 0))
    for job in jobs:
        (attempt,) = job.attempts.all()
        row = out[(minute(job.updated_at), job.queue, job.type, attempt.outcome)]
        row["count"] += 1
        row["wait_sum_us"] += waits[job.id]
        row["run_sum_us"] += (attempt.finished_at - attempt.started_at) // US
        row[WAIT_FIELDS[expected_wait_bucket(waits[job.id])]] += 1
    return dict(out)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_worker_process_run_is_counted_exactly(start_worker):
    """A real ``runworker`` runs completions, retried failures and dead jobs in two queues;
    the counts per minute, queue, type and outcome match the jobs' outcomes exactly."""
    for _ in range(7):
        Job.enqueue("noop")
    for _ in range(3):
        Job.enqueue("echo", {"x": 1}, queue="mail")
    for _ in range(2):
        Job.enqueue("permanent", queue="mail")  # dead at the first attempt
    for _ in range(2):
        Job.enqueue("always_fails")  # failed, to be retried an hour later
    hour = json.dumps({"BACKOFF_BASE": 3600, "BACKOFF_CAP": 3600, "BACKOFF_JITTER": False})
    worker = start_worker("--burst", "--worker-id", "counted", "--concurrency", "3",
                          env={"DJANGO_JOBS_TEST_EXTRA": hour})
    assert worker.wait(timeout=60) == 0, worker.output()
    jobs = list(Job.objects.all())
    assert sorted(Counter(j.status for j in jobs).items()) == [
        ("completed", 10), ("dead", 2), ("failed", 2)]
    # The wait of a job whose run_at the retry moved is read from its attempt's start and
    # when it was enqueued (run_at was its created_at: enqueued to run at once).
    waits = {j.id: (j.started_at - j.created_at) // US for j in jobs}
    assert counted() == expected_from_jobs(jobs, waits)
    assert_hours_hold_the_minutes()
    assert set(JobStat.objects.values_list("worker_id", flat=True)) == {"counted"}


@requires_row_locks
@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_two_workers_count_into_their_own_rows(start_worker):
    for i in range(40):
        Job.enqueue("noop", queue=("a", "b")[i % 2])
    workers = [start_worker("--burst", "--worker-id", name, "--concurrency", "2")
               for name in ("one", "two")]
    for worker in workers:
        assert worker.wait(timeout=60) == 0, worker.output()
    by_worker = dict(JobStat.objects.filter(span=MINUTE).values_list("worker_id")
                     .annotate(n=Sum("count")))
    ran = dict(Job.objects.values_list("worker_id").annotate(n=Sum("attempt")))
    assert by_worker == ran
    assert_hours_hold_the_minutes()
    assert sum(by_worker.values()) == 40


@pytest.mark.django_db
def test_off_counts_nothing():
    Job.enqueue("noop")
    with override_settings(DJANGO_JOBS={"STATS": False}), committed():
        assert run_burst() == 1
    assert not JobStat.objects.exists()
    with committed():
        run_burst()  # nothing left to run
    Job.enqueue("noop")
    with committed():
        assert run_burst() == 1
    assert [row.count for row in JobStat.objects.order_by("span")] == [1, 1]


@pytest.mark.django_db
def test_a_snooze_is_not_counted_and_a_fenced_out_outcome_neither():
    a, b = Job.enqueue("noop"), Job.enqueue("noop")
    first, second = claim(2)
    now = clock.now(Job.objects.db)
    snoozed = AttemptOutcome(first, "snoozed", now, now, snooze_seconds=60)
    Job.objects.filter(pk=second.pk).update(lease_token=None)  # taken over by another
    late = AttemptOutcome(second, "completed", now, now)
    with committed():
        assert Job.objects.finish([snoozed, late]) == [snoozed]
    assert not JobStat.objects.exists()
    assert {a.pk, b.pk} == {first.pk, second.pk}


# Outcomes the handler hands back, and what the worker's write makes of them.
KINDS = st.sampled_from(["completed", "failed", "permanent", "canceled"])
CASE = st.tuples(
    KINDS,
    st.sampled_from(["q1", "q2"]),
    st.sampled_from(["noop", "echo"]),
    # waits around every bound, and the run time in microseconds
    st.one_of(st.sampled_from(WAIT_BOUNDS_US), st.integers(0, 4_000_000_000)),
    st.integers(0, 10_000_000),
    st.integers(0, 1),  # 1: a second-to-last attempt that goes dead on failure
)


def claimed_with_waits(cases):
    """One claimed job per case, its run_at set so that its wait is the case's."""
    now = clock.now(Job.objects.db)
    ids = []
    for kind, queue, type, _, _, last in cases:
        job = Job.enqueue(type, queue=queue, max_attempts=1 if last or kind == "permanent" else 5)
        ids.append(job.pk)
    jobs = {j.pk: j for j in claim(len(cases), worker_id="prop")}
    assert len(jobs) == len(cases)
    started = {j.pk: j.started_at for j in jobs.values()}
    for pk, case in zip(ids, cases, strict=True):
        run_at = started[pk] - timedelta(microseconds=case[3])
        Job.objects.filter(pk=pk).update(run_at=run_at)  # fixture rows, before the finish
        jobs[pk].run_at = run_at
    outcomes = []
    for pk, (kind, _, _, _, run_us, _) in zip(ids, cases, strict=True):
        start = micros(now)
        outcomes.append(AttemptOutcome(
            jobs[pk], "failed" if kind == "permanent" else kind, start, start + run_us,
            error={"type": "E", "message": "m"} if kind != "completed" else None,
            permanent=kind == "permanent"))
    return outcomes


def expected_from_cases(cases) -> dict[tuple, dict[str, int]]:
    out: dict[tuple, dict[str, int]] = defaultdict(lambda: dict.fromkeys(SUMMED, 0))
    for kind, queue, type, wait, run_us, last in cases:
        if kind in ("permanent",) or (kind == "failed" and last):
            ended = "dead"
        else:
            ended = kind
        row = out[(queue, type, ended)]
        row["count"] += 1
        row["wait_sum_us"] += wait
        row["run_sum_us"] += run_us
        row[WAIT_FIELDS[expected_wait_bucket(wait)]] += 1
    return dict(out)


def counted_by_key() -> dict[tuple, dict[str, int]]:
    rows = counted(MINUTE)
    merged: dict[tuple, dict[str, int]] = defaultdict(lambda: dict.fromkeys(SUMMED, 0))
    for (_, queue, type, outcome), sums in rows.items():
        for name, value in sums.items():
            merged[(queue, type, outcome)][name] += value
    return dict(merged)


@pytest.mark.django_db
@given(cases=st.lists(CASE, min_size=1, max_size=12))
def test_every_outcome_is_counted_with_its_wait_and_run_time(cases):
    """Through the database's own finish (PostgreSQL's statement, the ORM elsewhere)."""
    JobStat.objects.all().delete()
    Job.objects.all().delete()
    outcomes = claimed_with_waits(cases)
    with committed():
        written = Job.objects.finish(outcomes)
    assert len(written) == len(cases)
    assert counted_by_key() == expected_from_cases(cases)
    assert_hours_hold_the_minutes()
    [minute_counted] = set(JobStat.objects.filter(span=MINUTE).values_list("bucket", flat=True))
    assert minute_counted == minute(Job.objects.latest("updated_at").updated_at)


@requires_postgres
@pytest.mark.django_db
@given(cases=st.lists(CASE, min_size=1, max_size=12))
def test_the_orm_path_counts_what_the_statement_counts(cases):
    """PostgreSQL's finish statement and the ORM's finish (the path of a snooze), on the
    same outcomes, write the same rows."""
    JobStat.objects.all().delete()
    Job.objects.all().delete()
    outcomes = claimed_with_waits(cases)
    with committed():
        Engine.finish(engine_for(connection.alias), outcomes)  # the ORM's path on PostgreSQL
    assert counted_by_key() == expected_from_cases(cases)
    assert_hours_hold_the_minutes()


@requires_postgres
@pytest.mark.django_db
@given(cases=st.lists(CASE, min_size=1, max_size=12))
def test_a_turn_counts_what_a_finish_counts(cases):
    """The one-statement turn (finish and claim) counts as the finish does."""
    JobStat.objects.all().delete()
    Job.objects.all().delete()
    outcomes = claimed_with_waits(cases)
    request = ClaimRequest(worker_id="prop", limit=1, lease_seconds=30.0, queues=None,
                           exclude_queues=())
    with committed():
        written, _ = engine_for(connection.alias).finish_and_claim(outcomes, request)
    assert len(written) == len(cases)
    assert counted_by_key() == expected_from_cases(cases)
    assert_hours_hold_the_minutes()


@pytest.mark.django_db
def test_a_second_batch_adds_to_the_same_rows():
    for _ in range(3):
        Job.enqueue("noop")
    for job in claim(3):
        now = clock.now(Job.objects.db)
        with committed():
            Job.objects.finish([AttemptOutcome(job, "completed", now, now)])
    rows = list(JobStat.objects.filter(span=MINUTE))
    assert sum(r.count for r in rows) == 3
    # one row per minute: the three finishes fall in one minute or straddle two
    assert len(rows) == len({r.bucket for r in rows})


def test_wait_buckets_follow_the_bounds():
    for us in [0, 1, *WAIT_BOUNDS_US, *(b + 1 for b in WAIT_BOUNDS_US), 10**12]:
        assert finish_counts.wait_bucket(us) == expected_wait_bucket(us)


def finished(count: int, queue: str = "default", capture: bool = True) -> list:
    """``count`` jobs claimed and finished completed, in one batch; with ``capture``, the
    finish's steps on commit run as its commit would (the test's transaction never commits)."""
    for _ in range(count):
        Job.enqueue("noop", queue=queue)
    now = clock.now(Job.objects.db)
    outcomes = [AttemptOutcome(job, "completed", now, now) for job in claim(count)]
    if not capture:
        assert len(Job.objects.finish(outcomes)) == count
        return outcomes
    with TestCase.captureOnCommitCallbacks(execute=True):
        assert len(Job.objects.finish(outcomes)) == count
    return outcomes


@pytest.mark.django_db
def test_a_finish_writes_no_count_row_and_the_flush_writes_them_all():
    finished(3)
    finished(2, queue="mail")
    assert not JobStat.objects.exists()  # kept in this process
    finish_counts.flush()
    assert {(r.span, r.queue): r.count for r in JobStat.objects.all()} == {
        (MINUTE, "default"): 3, (HOUR, "default"): 3, (MINUTE, "mail"): 2, (HOUR, "mail"): 2}
    finish_counts.flush()  # nothing kept: nothing added
    assert sum(JobStat.objects.values_list("count", flat=True)) == 10


@pytest.mark.django_db(transaction=True)
def test_a_finish_rolled_back_is_not_counted():
    with transaction.atomic():
        finished(2, capture=False)
        transaction.set_rollback(True)
    finish_counts.flush()
    assert not JobStat.objects.exists()
    finished(1, capture=False)  # autocommit: kept at once
    finish_counts.flush()
    assert [r.count for r in JobStat.objects.all()] == [1, 1]


@requires_postgres
@pytest.mark.django_db
def test_a_flush_that_fails_keeps_the_counts_for_the_next():
    finished(2)
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE django_jobs_jobstat RENAME TO django_jobs_jobstat_away")
    with pytest.raises(DatabaseError):
        finish_counts.flush()
    with connection.cursor() as cursor:
        cursor.execute("ALTER TABLE django_jobs_jobstat_away RENAME TO django_jobs_jobstat")
    finished(1)
    finish_counts.flush()
    assert sorted(r.count for r in JobStat.objects.all()) == [3, 3]


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_running_worker_writes_its_counts_at_its_heartbeat(start_worker):
    """No stop needed: the worker's heartbeat writes what it finished since the last one."""
    worker = start_worker("--worker-id", "beating", "--heartbeat", "0.5", "--poll-interval",
                          "0.2")
    for _ in range(4):
        Job.enqueue("noop")
    wait_for(lambda: sum(JobStat.objects.filter(span=MINUTE).values_list("count", flat=True))
             == 4, timeout=60)
    assert worker.proc.poll() is None  # still running
    assert set(JobStat.objects.values_list("worker_id", flat=True)) == {"beating"}
    worker.signal(signal.SIGTERM)
    assert worker.wait() == 0, worker.output()
