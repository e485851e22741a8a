"""One clock, the database's: workers and web processes whose host clock is off by 30 s judge
leases, rescue and readiness by the database server's time (``django_jobs/core/clock.py``).

The skewed processes are real subprocesses under libfaketime (``LD_PRELOAD``), which shifts
what the process's ``time.time()`` and ``datetime.now()`` say; ``time.monotonic()`` is left
alone (``FAKETIME_DONT_FAKE_MONOTONIC``), as a stepped wall clock leaves it.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from django_jobs.core import clock
from django_jobs.models import Job, JobAttempt, Worker
from tests.conftest import ROOT, requires_row_locks, wait_for
from tests.models import Execution

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
requires_faketime = pytest.mark.skipif(not LIBFAKETIME.exists(), reason="needs libfaketime")
FAST = ["--lease", "2", "--heartbeat", "0.3", "--poll-interval", "0.1"]
SKEWS = [pytest.param(30, id="ahead-30s"), pytest.param(-30, id="behind-30s")]


def skewed(seconds: int) -> dict[str, str]:
    """The environment of a process whose wall clock is ``seconds`` off this host's."""
    return {"LD_PRELOAD": str(LIBFAKETIME), "FAKETIME": f"{seconds:+d}s",
            "FAKETIME_DONT_FAKE_MONOTONIC": "1"}


def db_epoch() -> float:
    """The database server's time now, in seconds since the epoch (this host's on SQLite)."""
    query = clock.QUERIES.get(connection.vendor)
    if query is None:
        return time.time()
    with connection.cursor() as cursor:
        cursor.execute(query)
        return int(cursor.fetchone()[0]) / 1_000_000


def in_subprocess(code: str, env: dict[str, str]) -> dict:
    """Run ``code`` (which prints one JSON line last) in a Django process on the test database."""
    full_env = {**os.environ, "JOBS_DB_NAME": str(settings.DATABASES["default"]["NAME"]),
                "DJANGO_SETTINGS_MODULE": "tests.settings", **env}
    program = "import django; django.setup()\n" + code
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, env=full_env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# --- the offset and its warning, in this process ---


@pytest.mark.django_db
def test_sqlite_offset_is_zero_without_a_query():
    if connection.vendor != "sqlite":
        pytest.skip("SQLite only")
    clock.forget()
    with CaptureQueriesContext(connection) as queries:
        assert clock.measure("default") == timedelta(0)
        clock.now("default")
    assert len(queries) == 0


@pytest.mark.django_db
def test_now_measures_once_then_reuses_the_offset():
    clock.forget()
    with CaptureQueriesContext(connection) as queries:
        first = clock.now("default")
        second = clock.now("default")
    expected = 0 if connection.vendor == "sqlite" else 1
    assert len(queries) == expected
    assert first <= second
    # This host is the database's: the measured offset is the round trip's error at most.
    assert abs(clock.offset("default").total_seconds()) < 0.5


def test_the_offset_is_the_round_trips_midpoint_or_zero_when_the_reading_falls_inside_it():
    before, after = 1_000_000_000_000_000, 1_000_000_000_004_000  # a 4 ms round trip
    assert clock.estimate(before + 1_000, before, after) == 0  # this host's clock, or as good
    assert clock.estimate(before, before, after) == 0
    assert clock.estimate(after + 1, before, after) == 0  # a microsecond of rounding
    assert clock.estimate(before + 30_000_000, before, after) == 30_000_000 - 2_000
    assert clock.estimate(after - 30_000_000, before, after) == -30_000_000 + 2_000
    assert clock.estimate(after + 10, before, after) == 2_010  # just past the round trip


@pytest.mark.django_db
def test_with_use_tz_false_now_is_naive_local_time():
    from datetime import datetime

    clock.forget()
    with override_settings(USE_TZ=False):
        before = datetime.now()
        now = clock.now("default")
        after = datetime.now()
    assert now.tzinfo is None
    assert before <= now <= after  # the database is on this host: no offset


def test_the_warning_is_logged_once_and_the_return_once(caplog):
    caplog.set_level(logging.INFO, logger="django_jobs.clock")
    try:
        with override_settings(DJANGO_JOBS={"CLOCK_SKEW_WARNING_SECONDS": 2}):
            clock._keep("other", timedelta(seconds=1.5))
            clock._keep("other", timedelta(seconds=-31))
            clock._keep("other", timedelta(seconds=-30.5))
            clock._keep("other", timedelta(seconds=0.2))
            clock._keep("other", timedelta(seconds=0.1))
            clock._keep("other", timedelta(seconds=45))
    finally:
        clock.forget("other")
    lines = [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "django_jobs.clock"]
    assert [level for level, _ in lines] == ["WARNING", "INFO", "WARNING"]
    assert "31.000 s ahead of the clock of database 'other'" in lines[0][1]
    assert "CLOCK_SKEW_WARNING_SECONDS = 2" in lines[0][1]
    assert "back within 2 s" in lines[1][1]
    assert "45.000 s behind" in lines[2][1]


def test_no_warning_when_the_setting_is_none(caplog):
    caplog.set_level(logging.INFO, logger="django_jobs.clock")
    try:
        with override_settings(DJANGO_JOBS={"CLOCK_SKEW_WARNING_SECONDS": None}):
            clock._keep("other", timedelta(seconds=3600))
    finally:
        clock.forget("other")
    assert not [r for r in caplog.records if r.name == "django_jobs.clock"]


# --- skewed processes ---


@requires_faketime
@requires_row_locks
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("skew", SKEWS)
def test_a_skewed_process_measures_its_offset_and_enqueues_by_the_databases_clock(skew):
    """A web process 30 s off: the measured offset is the skew, and ``delay=`` counts from the
    database's time, so the delayed job is neither early nor late."""
    before = db_epoch()
    seen = in_subprocess(
        "import json, time\n"
        "from django_jobs.core import clock\n"
        "from django_jobs.models import Job\n"
        "job = Job.enqueue('record', {}, delay=20)\n"
        "print(json.dumps({'offset': clock.offset('default').total_seconds(),"
        " 'local': time.time(), 'pk': job.pk}))\n",
        skewed(skew),
    )
    after = db_epoch()
    assert -skew - 1 < seen["offset"] < -skew + 1
    assert skew - 5 < seen["local"] - after < skew + 1  # libfaketime shifted its clock
    run_at = Job.objects.get(pk=seen["pk"]).run_at.timestamp()
    assert before + 20 - 0.5 <= run_at <= after + 20 + 0.5


def started_job_ids() -> set[int]:
    return set(Job.objects.exclude(status__in=[Job.Status.PENDING, Job.Status.FAILED])
               .values_list("pk", flat=True))


@requires_faketime
@requires_row_locks
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("skew", SKEWS)
def test_a_skewed_worker_starts_no_delayed_job_early_or_late(start_worker, skew):
    """Jobs enqueued with ``delay=3`` by a host on the database's time start no earlier than
    their ``run_at`` by the database's clock in a worker 30 s off, and well before 30 s."""
    worker = start_worker("--worker-id", "skewed", "--concurrency", "3", *FAST,
                          env=skewed(skew))
    wait_for(lambda: Worker.objects.filter(pk="skewed").exists(), timeout=60)
    jobs = [Job.enqueue("record", {}, delay=3) for _ in range(3)]
    run_at = {job.pk: job.run_at.timestamp() for job in jobs}
    early: list[int] = []
    started: set[int] = set()
    deadline = time.monotonic() + 3 + 15  # a late start is one 30 s late: well past this
    while time.monotonic() < deadline and len(started) < len(jobs) and not early:
        started = started_job_ids()  # read first: a job seen started began before ``now``
        now = db_epoch()
        early += [pk for pk in started if now < run_at[pk]]
        time.sleep(0.05)
    assert not early, f"started before their run_at by the database's clock: {early}"
    assert len(started) == len(jobs), "not started within 15 s of their run_at"
    wait_for(lambda: Job.objects.filter(status=Job.Status.COMPLETED).count() == len(jobs),
             timeout=10)
    warnings = [line for line in worker.output().splitlines()
                if "CLOCK_SKEW_WARNING_SECONDS" in line]
    assert len(warnings) == 1, worker.output()  # one warning, however many heartbeats


@requires_faketime
@requires_row_locks
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("skew", SKEWS)
def test_a_skewed_worker_beside_a_normal_one_rescues_nothing_and_is_not_rescued(
    start_worker, skew
):
    """Lease 2 s, heartbeat 0.3 s: whichever of the two holds the jobs, the other one's rescue
    pass finds no expired lease, so no job gets a lost attempt or runs twice."""
    holder_env, rescuer_env = ({}, skewed(skew)) if skew > 0 else (skewed(skew), {})
    # Due well in the past on every clock: this test is about leases, not readiness.
    past = timezone.now() - timedelta(minutes=5)
    jobs = [Job.enqueue("record_waiting", {"wait": 6}, run_at=past) for _ in range(4)]
    holder = start_worker("--worker-id", "holder", "--concurrency", "4", *FAST, env=holder_env)
    wait_for(lambda: Job.objects.filter(status=Job.Status.PROCESSING,
                                        worker_id="holder").count() == 4, timeout=60)
    rescuer = start_worker("--worker-id", "rescuer", "--concurrency", "4", *FAST,
                           env=rescuer_env)

    def rescuer_beats() -> int:
        row = Worker.objects.filter(pk="rescuer").values("started_at", "last_heartbeat").first()
        return 0 if row is None else int(row["last_heartbeat"] > row["started_at"])

    wait_for(rescuer_beats, timeout=60)
    first_beat = Worker.objects.get(pk="rescuer").last_heartbeat
    # Two heartbeats of the rescuer at least (each begins with a rescue pass), while the
    # holder still runs every job.
    wait_for(lambda: Worker.objects.get(pk="rescuer").last_heartbeat > first_beat, timeout=30)
    wait_for(lambda: Job.objects.filter(status=Job.Status.COMPLETED).count() == 4, timeout=60)
    lost = JobAttempt.objects.filter(outcome=JobAttempt.Outcome.LOST).count()
    runs = sorted(Execution.objects.values_list("job_public_id", flat=True))
    assert lost == 0
    assert runs == sorted(job.public_id for job in jobs)  # each handler ran once
    assert set(Job.objects.values_list("attempt", "worker_id")) == {(1, "holder")}
    assert "rescued job" not in holder.output() + rescuer.output()
    assert "lost the lease" not in holder.output()


@pytest.mark.django_db
def test_an_offset_older_than_a_minute_is_measured_again():
    clock.forget()
    clock.now("default")
    clock._offsets["default"].measured -= clock.REMEASURE_SECONDS + 1
    with CaptureQueriesContext(connection) as queries:
        clock.now("default")
        clock.now("default")
    assert len(queries) == (0 if connection.vendor == "sqlite" else 1)
    assert time.monotonic() - clock._offsets["default"].measured < clock.REMEASURE_SECONDS


@requires_faketime
@requires_row_locks
@pytest.mark.django_db(transaction=True)
def test_a_step_of_a_workers_clock_is_caught_on_its_next_heartbeat(start_worker, tmp_path):
    """A worker whose host clock jumps 30 s ahead while it runs (an NTP step, a VM resumed)
    measures the new offset at the start of its next heartbeat, before its rescue pass, so it
    rescues none of the jobs a live worker holds."""
    step = tmp_path / "faketime"
    step.write_text("+0s\n")
    past = timezone.now() - timedelta(minutes=5)
    jobs = [Job.enqueue("record_waiting", {"wait": 8}, run_at=past) for _ in range(4)]
    holder = start_worker("--worker-id", "holder", "--concurrency", "4", *FAST)
    wait_for(lambda: Job.objects.filter(status=Job.Status.PROCESSING,
                                        worker_id="holder").count() == 4, timeout=60)
    env = {"LD_PRELOAD": str(LIBFAKETIME), "FAKETIME_TIMESTAMP_FILE": str(step),
           "FAKETIME_NO_CACHE": "1", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    stepped = start_worker("--worker-id", "stepped", "--concurrency", "4", *FAST, env=env)

    def beat() -> object:
        row = Worker.objects.filter(pk="stepped").values("started_at", "last_heartbeat").first()
        return row and row["last_heartbeat"] > row["started_at"] and row["last_heartbeat"]

    first = wait_for(beat, timeout=60)
    step.write_text("+30s\n")
    wait_for(lambda: "CLOCK_SKEW_WARNING_SECONDS" in stepped.output(), timeout=30)
    after_step = Worker.objects.get(pk="stepped").last_heartbeat
    assert after_step >= first
    wait_for(lambda: Worker.objects.get(pk="stepped").last_heartbeat > after_step, timeout=30)
    wait_for(lambda: Job.objects.filter(status=Job.Status.COMPLETED).count() == 4, timeout=60)
    assert JobAttempt.objects.filter(outcome=JobAttempt.Outcome.LOST).count() == 0
    assert sorted(Execution.objects.values_list("job_public_id", flat=True)) == sorted(
        job.public_id for job in jobs)
    assert "rescued job" not in stepped.output() + holder.output()


@pytest.mark.parametrize("value", ["2", -1, True, [2]])
def test_a_bad_clock_skew_setting_is_refused_by_the_system_check(value):
    from django_jobs.checks.configuration import check_settings

    with override_settings(DJANGO_JOBS={"CLOCK_SKEW_WARNING_SECONDS": value}):
        assert [e.id for e in check_settings()] == ["django_jobs.E005"]
    for fine in (None, 0, 2, 0.5):
        with override_settings(DJANGO_JOBS={"CLOCK_SKEW_WARNING_SECONDS": fine}):
            assert check_settings() == []


@requires_faketime
@requires_row_locks
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("skew", SKEWS)
def test_the_admins_ages_on_a_skewed_web_host_are_by_the_databases_clock(skew):
    """The admin's "oldest ready job waiting" and "last heartbeat ... ago": a time the database
    wrote 10 s ago shows as 10 s on a web host 30 s off, not 40 s or nothing."""
    seen = in_subprocess(
        "import json\n"
        "from datetime import timedelta\n"
        "from django_jobs.core import clock\n"
        "from django_jobs.templatetags.jobs_admin import since\n"
        "print(json.dumps({'age': since(clock.now('default') - timedelta(seconds=10))}))\n",
        skewed(skew),
    )
    number, unit = seen["age"].split()
    assert unit == "s" and 9 <= float(number) <= 12, seen


@requires_faketime
@requires_row_locks
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("skew", SKEWS)
def test_a_skewed_workers_abandoned_attempt_ends_after_it_starts(start_worker, skew):
    """A handler that ignores its timeout (0.3 s, then the 5 s grace) in a worker 30 s off: the
    abandoned attempt's start and end are both on the worker's clock, about 5 s apart, not 30 s
    more or less (the job's started_at is the database's time)."""
    stuck = Job.enqueue("timeout_blocking_lock", {"seconds": 30})
    worker = start_worker("--worker-id", "skewed", *FAST, env=skewed(skew))
    wait_for(lambda: Job.objects.get(pk=stuck.pk).status == Job.Status.DEAD, timeout=60)
    worker.stop()
    attempt = JobAttempt.objects.get(job=stuck)
    assert "abandoned" in attempt.error["message"]
    ran = (attempt.finished_at - attempt.started_at).total_seconds()
    assert 5 <= ran < 20, ran
