"""django-jobs under the two routers of Django's docs (``tests/settings_routers.py``): every read
and write of the app goes to the database the jobs live on.

Run by ``tests/fidelity/test_routers.py`` (once per router, in a pytest of its own with
``--ds=tests.settings_routers``); not collected by the suite itself. ``JOBS`` is the alias the
jobs live on and ``OTHER`` the second one: the replica (a separate database with the same
tables, so a job written through it is missing from ``default``), or ``default`` (which has no
jobs tables, so a write there fails).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.core.management import call_command
from django.db import connections, transaction
from django.test import Client
from django.utils import timezone

from django_jobs.checks.configuration import check_settings
from django_jobs.models import IdempotencyKey, Job
from django_jobs.models.schema import jobs_database

from .api_support import Api, make_token
from .conftest import wait_for

ROOT = Path(__file__).resolve().parent.parent
ROUTER = settings.ROUTER
JOBS = "default" if ROUTER == "replica" else "jobs"
OTHER = "replica" if ROUTER == "replica" else "default"
pytestmark = pytest.mark.django_db(databases=["default", settings.SECOND], transaction=True)


def on_jobs_database(*jobs: Job) -> list[str]:
    """The statuses of these jobs, read on the jobs' alias by name (no router involved)."""
    found = dict(Job.objects.using(JOBS).filter(pk__in=[j.pk for j in jobs])
                 .values_list("pk", "status"))
    return [found.get(j.pk, "missing") for j in jobs]


@pytest.fixture(autouse=True)
def nothing_on_the_other_database():
    """After each test: no job row on the replica (the jobs router's ``default`` has no jobs
    table, so a write there has failed the test already)."""
    yield
    if ROUTER == "replica":
        assert Job.objects.using(OTHER).count() == 0, "a job was written through the replica"


def test_the_jobs_database_is_the_routers_write_alias():
    assert jobs_database() == JOBS
    assert Job.objects.db == JOBS and Job.objects.filter(queue="x").db == JOBS


def test_enqueue_and_enqueue_many_write_to_the_jobs_database():
    one = Job.enqueue("noop", {"n": 1})
    many = Job.objects.enqueue_many("noop", [{"n": 2}, {"n": 3}])
    assert on_jobs_database(one, *many) == ["pending"] * 3
    assert Job.objects.get(pk=one.pk).payload == {"n": 1}  # read back where it was written


def test_a_job_enqueued_in_a_rolled_back_transaction_is_gone():
    with pytest.raises(RuntimeError), transaction.atomic(using=JOBS):
        Job.enqueue("noop")
        raise RuntimeError("roll back")
    assert Job.objects.using(JOBS).count() == 0


def test_cancel_and_retry_lock_and_write_on_the_jobs_database():
    job = Job.enqueue("noop")
    assert job.cancel() is True
    assert on_jobs_database(job) == ["canceled"]
    assert job.retry() is True
    assert on_jobs_database(job) == ["pending"]


def test_the_warning_about_atomic_names_the_jobs_alias():
    found = [w for w in check_settings() if w.id == "django_jobs.W003"]
    if JOBS == "default":
        assert found == []
    else:
        assert len(found) == 1 and "'jobs'" in found[0].msg


def test_api_post_and_concurrent_idempotency_keys_make_one_job():
    token = make_token("submit", "read")
    body = {"type": "echo", "payload": {"n": 1}}
    first = Api(token).post("/api/jobs", body)
    assert first.status_code == 201, first.content
    assert on_jobs_database(Job.objects.get(public_id=first.json()["job_id"])) == ["pending"]

    barrier = threading.Barrier(20)
    answers: list[int] = []

    def post() -> None:
        try:
            barrier.wait(timeout=30)
            answers.append(Api(token, Client()).post(
                "/api/jobs", body, headers={"Idempotency-Key": "once"}).status_code)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=post) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert len(answers) == 20 and set(answers) <= {200, 201, 409}, answers
    assert IdempotencyKey.objects.using(JOBS).count() == 1
    assert Job.objects.using(JOBS).count() == 2  # the first POST's job and the keyed one


def test_admin_actions_act_on_the_jobs_database(django_user_model):
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw")
    client = Client()
    client.force_login(admin)
    jobs = [Job.enqueue("noop") for _ in range(2)]
    response = client.post("/admin/django_jobs/job/", {
        "action": "cancel_jobs", ACTION_CHECKBOX_NAME: [j.pk for j in jobs], "index": 0,
    }, follow=True)
    assert response.status_code == 200
    assert on_jobs_database(*jobs) == ["canceled", "canceled"]
    listed = client.get("/admin/django_jobs/job/")
    assert listed.status_code == 200 and jobs[0].public_id in listed.content.decode()
    page = client.get(f"/admin/django_jobs/job/{jobs[0].pk}/change/")
    assert page.status_code == 200
    retried = client.post(f"/admin/django_jobs/job/{jobs[0].pk}/do/retry/", follow=True)
    assert retried.status_code == 200
    assert on_jobs_database(*jobs) == ["pending", "canceled"]


def test_the_commands_read_and_write_the_jobs_database(capsys):
    job = Job.enqueue("noop")
    call_command("jobs", "list")
    assert job.public_id in capsys.readouterr().out
    call_command("jobs", "cancel", job.public_id)
    assert on_jobs_database(job) == ["canceled"]
    Job.objects.using(JOBS).filter(pk=job.pk).update(
        created_at=timezone.now() - timedelta(days=30),
        finished_at=timezone.now() - timedelta(days=30))
    call_command("prunejobs", "--canceled=1d")
    assert on_jobs_database(job) == ["missing"]


@pytest.mark.skipif(not settings.HAS_TASKS_FRAMEWORK, reason="no django.tasks framework")
def test_the_tasks_backend_enqueues_and_reads_on_the_jobs_database():
    from .tasks import noop_task

    result = noop_task.enqueue()
    job = Job.objects.using(JOBS).get(public_id=result.id)
    assert on_jobs_database(job) == ["pending"]
    assert noop_task.get_result(result.id).id == result.id


# Real workers.


class Worker:
    """A ``runworker`` process under these settings (the router's variant of conftest's)."""

    def __init__(self, *args: str) -> None:
        self.log = open(ROOT / "tests" / "artifacts" / f"routed-worker-{time.time_ns()}.log",
                        "w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "django", "runworker", "--settings=tests.settings_routers",
             *args], cwd=ROOT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
            stdout=self.log, stderr=subprocess.STDOUT)

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def worker():
    started: list[Worker] = []

    def start(*args: str) -> Worker:
        started.append(Worker(*args))
        return started[-1]

    yield start
    for one in started:
        one.stop()


def all_completed(jobs: list[Job]) -> bool:
    return on_jobs_database(*jobs) == ["completed"] * len(jobs)


def test_a_worker_drains_the_jobs_database(worker):
    jobs = list(Job.objects.enqueue_many("noop", [{"n": n} for n in range(30)]))
    started = worker("--concurrency", "2")
    wait_for(lambda: all_completed(jobs) or started.proc.poll() is not None, timeout=60)
    assert all_completed(jobs), started.output()


def listening(alias: str) -> bool:
    """A session on ``alias``'s database has run LISTEN (the worker's listener)."""
    name = connections[alias].settings_dict["NAME"]
    with connections[OTHER if alias == JOBS else JOBS].cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND "
                       "query ILIKE 'LISTEN%%'", [name])
        return cursor.fetchone()[0] > 0


def test_an_idle_worker_wakes_on_notify_from_the_jobs_database(worker):
    # Polls and heartbeats far apart: within the wait below, only a notification wakes it.
    started = worker("--poll-interval", "120", "--heartbeat", "100", "--lease", "300")
    wait_for(lambda: listening(JOBS) or started.proc.poll() is not None, timeout=30)
    assert listening(JOBS), started.output()
    job = Job.enqueue("noop")
    wait_for(lambda: all_completed([job]) or started.proc.poll() is not None, timeout=30)
    assert all_completed([job]), started.output()


def cut_connections(alias: str) -> int:
    """Terminate every session on ``alias``'s database, from a connection to the other one."""
    name = connections[alias].settings_dict["NAME"]
    with connections[OTHER].cursor() as cursor:
        cursor.execute("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                       "WHERE datname = %s AND pid <> pg_backend_pid()", [name])
        cut = cursor.fetchone()[0]
    connections[alias].close()  # this test's own session was among them
    return cut


def test_a_worker_recovers_after_the_jobs_databases_connections_are_cut(worker):
    before = [Job.enqueue("noop") for _ in range(3)]
    started = worker("--poll-interval", "0.2")
    wait_for(lambda: all_completed(before) or started.proc.poll() is not None, timeout=60)
    assert all_completed(before), started.output()
    assert cut_connections(JOBS) > 0
    after = list(Job.objects.enqueue_many("noop", [{"n": n} for n in range(20)]))
    wait_for(lambda: all_completed(after) or started.proc.poll() is not None, timeout=90)
    assert all_completed(after), started.output()
