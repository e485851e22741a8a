"""``USE_TZ = False``: naive times, in ``TIME_ZONE``, through every face and a real worker.

Under tests.settings the one test here runs the suite's main paths again in a pytest
subprocess under tests.settings_naive (``USE_TZ = False``, ``TIME_ZONE = "Asia/Kolkata"``),
the tests below included; those run only there. Kolkata is five and a half hours from UTC,
so a naive time read as UTC, or a UTC time shown as local, is off by more than any test
allows.
"""

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import override_settings
from django.utils import timezone

from django_jobs.models import Job, Worker
from tests.admin_helpers import add_attempt, job_url, make_job
from tests.api_support import Api, make_token
from tests.conftest import ROOT

# The suite's main paths: the admin, the API, the commands, the Tasks backend, the worker
# (in this process and as runworker subprocesses: a kill -9 rescued by the lease, a job handed
# back at shutdown, a timeout retried), retries, retention, schedules. Of the runworker
# subprocesses only the tests whose outcome is decided by a time the database writes or reads
# (a lease, a run_at) run here: the others (signals, outages, a drain of 2000 jobs) test the
# process, whatever USE_TZ is. The crash tests are left out: they run workers that crash over
# and over, and a crash is rescued by the lease, as in the kill -9 test.
NAIVE_FILES = [
    "tests/fidelity/test_naive_times.py", "tests/faces/admin/test_admin_pages.py",
    "tests/faces/admin/test_admin_overview.py", "tests/faces/admin/test_admin_actions.py",
    "tests/faces/admin/test_admin_edit_payload.py", "tests/faces/admin/test_admin_hostile.py",
    "tests/faces/admin/test_schedule_admin.py", "tests/faces/api/test_api_read.py",
    "tests/faces/api/test_api_submit.py", "tests/faces/api/test_api_manage.py",
    "tests/faces/commands/test_commands.py", "tests/features/test_retention.py",
    "tests/faces/tasks/test_tasks_backend.py", "tests/faces/tasks/test_tasks_results.py",
    "tests/faces/tasks/test_tasks_worker.py", "tests/engine/test_engine.py",
    "tests/engine/test_claiming.py", "tests/engine/test_bulk_insert.py",
    "tests/engine/test_write_path.py", "tests/worker/test_worker.py", "tests/core/test_retry.py",
    "tests/worker/test_processes.py::test_kill_9_mid_job_is_rescued_and_completed_by_another_worker",
    "tests/worker/test_processes.py::test_job_still_running_at_shutdown_timeout_is_handed_back_unspent",
    "tests/worker/test_timeouts.py::test_a_job_past_its_timeout_is_stopped_counted_failed_and_retried",
]
NAIVE_ONLY = "runs under tests.settings_naive, started by the test above"
naive_only = pytest.mark.skipif(settings.USE_TZ, reason=NAIVE_ONLY)


@pytest.mark.slow
@pytest.mark.settings_pass
@pytest.mark.skipif(not settings.USE_TZ, reason="this is the run under USE_TZ = False")
def test_the_main_paths_pass_under_use_tz_false():
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings_naive"}
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
         "--ds=tests.settings_naive", *NAIVE_FILES],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=3600,
    )
    assert run.returncode == 0, run.stdout[-8000:] + run.stderr[-2000:]
    assert " passed" in run.stdout and NAIVE_ONLY not in run.stdout  # the tests below ran


KOLKATA = ZoneInfo("Asia/Kolkata")


def utc_z(naive: datetime) -> str:
    """A naive time of the Kolkata test zone as the API writes it."""
    return naive.replace(tzinfo=KOLKATA).astimezone(UTC).isoformat().replace("+00:00", "Z")


def now_z(delta: timedelta = timedelta(0)) -> str:
    return (datetime.now(UTC) + delta).strftime("%Y-%m-%dT%H:%M:%SZ")


@naive_only
def test_the_settings_are_naive_in_a_zone_far_from_utc():
    assert not settings.USE_TZ and settings.TIME_ZONE == "Asia/Kolkata"
    assert timezone.is_naive(timezone.now())
    # Django's own clock, read in the zone: not UTC's wall time.
    assert abs(timezone.now() - datetime.now(UTC).astimezone(KOLKATA).replace(tzinfo=None)) < (
        timedelta(minutes=5))


# The API: times in UTC with a Z, cursors and since read in the zone.

@naive_only
@pytest.mark.django_db
def test_api_times_are_utc_with_a_z():
    api = Api(make_token("read"))
    job = make_job("dead")
    add_attempt(job)
    job.refresh_from_db()
    assert timezone.is_naive(job.created_at)
    data = api.get(f"/api/jobs/{job.public_id}").json()
    assert data["created_at"] == utc_z(job.created_at)
    assert data["finished_at"] == utc_z(job.finished_at)
    assert data["attempts"][0]["started_at"] == utc_z(job.attempts.get().started_at)
    listed = api.get("/api/jobs").json()["results"][0]
    assert listed["updated_at"] == utc_z(job.updated_at)


@naive_only
@pytest.mark.django_db
def test_api_pages_follow_their_cursors_both_ways():
    api = Api(make_token("read"))
    made = [Job.enqueue("noop").public_id for _ in range(5)]
    seen, response = [], api.get("/api/jobs", limit=2)
    while True:
        assert response.status_code == 200, response.content
        page = response.json()
        seen += [j["job_id"] for j in page["results"]]
        if not page["next"]:
            break
        last = page
        response = api.client.get(page["next"], headers=api.headers)
    assert seen == made[::-1]
    back = api.client.get(last["next"], headers=api.headers).json()["previous"]
    newer = api.client.get(back, headers=api.headers).json()
    assert [j["job_id"] for j in newer["results"]] == made[::-1][2:4]


@naive_only
@pytest.mark.django_db
def test_api_since_is_an_instant_whatever_the_zone():
    api = Api(make_token("read"))
    old, new = Job.enqueue("noop"), Job.enqueue("noop")
    Job.objects.filter(pk=old.pk).update(updated_at=timezone.now() - timedelta(hours=2))

    def since(text):
        response = api.get("/api/jobs", since=text)
        assert response.status_code == 200, response.content
        return [j["job_id"] for j in response.json()["results"]]

    assert since(now_z(-timedelta(hours=1))) == [new.public_id]
    assert since(now_z(timedelta(minutes=30))) == []
    assert since(now_z(-timedelta(hours=3))) == [new.public_id, old.public_id]
    assert since("9999-12-31T23:59:59Z") == []
    assert len(since("0001-01-01T00:00:00Z")) == 2


@naive_only
@pytest.mark.django_db
def test_api_submit_with_a_delay_and_a_run_at():
    api = Api(make_token("submit", "read"))
    at = datetime.now(UTC) + timedelta(hours=2)
    response = api.post("/api/jobs", {"type": "echo", "payload": {}, "delay": 60000})
    assert response.status_code == 201, response.content
    job = Job.objects.get(public_id=response.json()["job_id"])
    assert timedelta(seconds=55) < job.run_at - timezone.now() < timedelta(seconds=65)
    # A Python caller's aware run_at is kept as the same instant, naive in the zone.
    later = Job.enqueue("echo", run_at=at)
    later.refresh_from_db()
    assert later.run_at == at.astimezone(KOLKATA).replace(tzinfo=None)


# The admin.

@pytest.fixture
def root(client):
    client.force_login(User.objects.create_superuser("root", "r@example.com", "pw"))
    return client


@naive_only
@pytest.mark.django_db
def test_admin_list_job_page_and_overview_show_times_in_the_zone(root):
    jobs = [make_job(status) for status in
            ("pending", "processing", "completed", "failed", "dead", "canceled")]
    add_attempt(jobs[4])
    Worker.objects.create(worker_id="w-1", hostname="h", pid=1, queues=["default"])
    listing = root.get("/admin/django_jobs/job/")
    assert listing.status_code == 200 and len(listing.context["cl"].result_list) == 6
    job = jobs[4]
    job.refresh_from_db()
    page = root.get(job_url(job))
    assert page.status_code == 200
    html = page.content.decode()
    assert job.created_at.strftime("%Y-%m-%d %H:%M:%S") in html  # as stored: in the zone
    assert " IST" in html  # the precise times name it
    overview = root.get("/admin/django_jobs/job/overview/")
    assert overview.status_code == 200 and "w-1" in overview.content.decode()


@naive_only
@pytest.mark.django_db
def test_admin_date_drill_down_lists_the_days_of_the_zone(root):
    job = make_job("completed")
    job.refresh_from_db()
    day = job.created_at
    html = root.get("/admin/django_jobs/job/").content.decode()
    assert f"created_at__year={day.year}" in html or f"created_at__day={day.day}" in html
    chosen = root.get("/admin/django_jobs/job/", {
        "created_at__year": day.year, "created_at__month": day.month, "created_at__day": day.day})
    assert [j.pk for j in chosen.context["cl"].result_list] == [job.pk]


@naive_only
@pytest.mark.django_db
@override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "SCHEDULES": {
    "often": {"type": "noop", "every": 900},
    "nightly": {"type": "echo", "cron": "0 3 * * *", "timezone": "Europe/Paris"},
}})
def test_admin_schedules_list_and_run_now(root):
    from django_jobs.models import Schedule

    page = root.get("/admin/django_jobs/schedule/")
    assert page.status_code == 200
    often = Schedule.objects.get(name="often")
    assert timezone.is_naive(often.next_run_at)
    assert timedelta(0) < often.next_run_at - timezone.now() <= timedelta(minutes=15)
    nightly = Schedule.objects.get(name="nightly").next_run_at
    assert nightly.replace(tzinfo=KOLKATA).astimezone(ZoneInfo("Europe/Paris")).hour == 3
    response = root.post("/admin/django_jobs/schedule/",
                         {"action": "run_now_action", "_selected_action": ["often"]})
    assert response.status_code == 302
    assert Job.objects.filter(type="noop").count() == 1


@naive_only
@pytest.mark.django_db
def test_schedules_tick_on_naive_times_of_the_zone():
    from django_jobs.features.schedules.config import parse
    from django_jobs.features.schedules.ticker import tick
    from django_jobs.models import Schedule, ScheduleOccurrence

    t0 = datetime(2026, 1, 5, 15, 30, 0)  # 10:00 UTC in Kolkata
    specs = {"s": parse("s", {"type": "echo", "every": 60}),
             "c": parse("c", {"type": "noop", "cron": "0 3 * * *", "timezone": "Europe/Paris"})}
    assert tick(specs, t0 + timedelta(seconds=5)) == 0
    assert Schedule.objects.get(name="s").next_run_at == t0 + timedelta(minutes=1)
    # 03:00 in Paris (UTC+1 in January) is 07:30 in Kolkata, the next morning.
    assert Schedule.objects.get(name="c").next_run_at == datetime(2026, 1, 6, 7, 30)
    assert tick(specs, t0 + timedelta(minutes=1, seconds=2)) == 1
    assert tick(specs, t0 + timedelta(minutes=2, seconds=1)) == 1
    assert [o.at for o in ScheduleOccurrence.objects.order_by("at")] == [
        t0 + timedelta(minutes=1), t0 + timedelta(minutes=2)]


# The commands.

@naive_only
@pytest.mark.django_db
def test_commands_read_and_write_times_in_the_zone():
    old, new = make_job("completed"), make_job("dead")
    Job.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=40),
                                         finished_at=timezone.now() - timedelta(days=40))
    new.refresh_from_db()

    def run(*args):
        out = StringIO()
        call_command(*args, stdout=out)
        return out.getvalue()

    listed = json.loads(run("jobs", "list", "--json", "--since", "1d"))
    assert [j["job_id"] for j in listed] == [new.public_id]
    assert listed[0]["created_at"] == utc_z(new.created_at)
    local = (timezone.now() - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")  # in the zone
    assert [j["job_id"] for j in json.loads(run("jobs", "list", "--json", "--since", local))] \
        == [new.public_id]
    aware = now_z(-timedelta(hours=1))
    assert [j["job_id"] for j in json.loads(run("jobs", "list", "--json", "--since", aware))] \
        == [new.public_id]
    assert utc_z(new.created_at) in run("jobs", "list")
    assert f"created_at:       {utc_z(new.created_at)}" in run("jobs", "show", new.public_id)
    assert json.loads(run("jobs", "counts", "--json"))
    assert "completed: deleted 1" in run("prunejobs")
    assert list(Job.objects.values_list("pk", flat=True)) == [new.pk]


# The Tasks backend.

@naive_only
@pytest.mark.django_db
def test_a_task_deferred_in_the_zone_keeps_its_time():
    from tests import tasks as test_tasks

    later = timezone.now() + timedelta(hours=1)
    result = test_tasks.noop_task.using(run_after=later).enqueue()
    job = Job.objects.get(public_id=result.id)
    assert job.run_at == later and timezone.is_naive(result.enqueued_at)
    assert test_tasks.noop_task.get_result(result.id).task.run_after == later


# A real worker.

@naive_only
@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_runworker_burst_runs_a_delayed_job_and_a_retry_in_the_zone(start_worker):
    before = timezone.now()
    delayed = Job.enqueue("echo", {"x": 1}, delay=0.5)
    far = Job.enqueue("echo", {"x": 2}, delay=timedelta(hours=1))
    flaky = Job.enqueue("flaky", {"fail_times": 1})
    time.sleep(1)
    for _ in range(20):  # each run ends when nothing is ready: the retry's backoff is 50 ms
        worker = start_worker("--burst", "--poll-interval", "0.05")
        assert worker.wait() == 0, worker.output()
        flaky.refresh_from_db()
        if flaky.status == "completed":
            break
    after = timezone.now()
    delayed.refresh_from_db()
    far.refresh_from_db()
    assert delayed.status == "completed" and far.status == "pending"
    assert flaky.status == "completed" and flaky.attempt == 2
    attempts = list(flaky.attempts.order_by("number"))
    assert [a.outcome for a in attempts] == ["failed", "completed"]
    for moment in (delayed.started_at, delayed.finished_at, *(a.started_at for a in attempts),
                   flaky.finished_at):
        assert before <= moment <= after  # written in the zone, not in UTC
    assert attempts[1].started_at >= attempts[0].finished_at
