"""``READ_REPLICA`` set to a real streaming standby, stopped and paused: the pages read the
primary a while and say so, and the API answers JSON whatever the databases do.

A throwaway primary cluster (tests/chaos/cluster.py; never the shared server) holds the jobs,
migrated by ``manage.py migrate`` run against it; a standby copied from it by
``pg_basebackup -R`` streams its WAL. The site routes the app to the primary and names the
standby in ``READ_REPLICA``; the users and sessions of the admin stay on ``default``.
"""

import logging
import os
import subprocess
import sys
import time

import psycopg
import pytest
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db import connections
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from django_jobs.engine import read_replica
from django_jobs.models import Job
from tests.admin_helpers import make_job, staff
from tests.api_support import Api, make_token
from tests.chaos.cluster import Standby, throwaway
from tests.conftest import ROOT, requires_postgres, wait_for

pytestmark = requires_postgres
DATABASE = "replica_jobs"
PRIMARY, STANDBY = "standby_primary", "standby_replica"
LIST = "/admin/django_jobs/job/"
OVERVIEW = "/admin/django_jobs/job/overview/"
NOTE = 'id="read-replica"'
on_the_pair = pytest.mark.django_db(transaction=True,
                                    databases=["default", PRIMARY, STANDBY])


class Pair:
    def __init__(self, primary, standby) -> None:
        self.primary, self.standby = primary, standby

    def session(self, cluster) -> psycopg.Connection:
        return psycopg.connect(host="127.0.0.1", port=cluster.port, user="postgres",
                               dbname=DATABASE, autocommit=True, connect_timeout=5)

    def on_standby(self, sql: str):
        with self.session(self.standby) as conn:
            return conn.execute(sql).fetchone()

    def caught_up(self) -> bool:
        """The standby has applied all the primary has written."""
        with self.session(self.primary) as primary:
            (written,) = primary.execute("SELECT pg_current_wal_lsn()").fetchone()
        with self.session(self.standby) as standby:
            (applied,) = standby.execute(
                "SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", [written]).fetchone()
        return applied


@pytest.fixture(scope="module")
def pair(django_db_setup):
    with throwaway(DATABASE) as primary:
        env = {"DJANGO_JOBS_TEST_DB": "postgres", "PGHOST": "127.0.0.1",
               "PGPORT": str(primary.port), "JOBS_DB_NAME": DATABASE}
        migrate = subprocess.run(
            [sys.executable, "-m", "django", "migrate", "--settings=tests.settings", "-v", "0"],
            cwd=ROOT, env={**os.environ, **env}, capture_output=True, text=True, timeout=300)
        assert migrate.returncode == 0, migrate.stderr[-3000:]
        standby = Standby(primary)
        try:
            standby.start()
            # The site's aliases, declared before a test's databases are set up (module
            # scope), as mirrors so that no test run creates or flushes them.
            default = connections.settings["default"]
            for alias, cluster in ((PRIMARY, primary), (STANDBY, standby)):
                connections.settings[alias] = dict(
                    default, NAME=DATABASE, HOST="127.0.0.1", PORT=str(cluster.port),
                    USER="postgres", PASSWORD="", OPTIONS={"connect_timeout": 5},
                    TEST={**default["TEST"], "NAME": DATABASE, "MIRROR": "default"})
            yield Pair(primary, standby)
        finally:
            for alias in (PRIMARY, STANDBY):
                if alias in connections.settings:
                    connections[alias].close()
                    del connections[alias]
                    del connections.settings[alias]
            standby.destroy()


class JobsOnThePrimary:
    """The app on a database of its own, as in docs/explanation-databases.md."""

    def db_for_read(self, model, **hints):
        return PRIMARY if model._meta.app_label == "django_jobs" else None

    db_for_write = db_for_read


@pytest.fixture
def site(pair):
    """Both servers up and the standby replaying; the site's aliases for them, the app routed
    to the primary and the standby named in READ_REPLICA (set aside quickly, back soon)."""
    for cluster in (pair.primary, pair.standby):
        if not cluster.running():
            cluster.start()
    pair.on_standby("SELECT pg_wal_replay_resume()")
    with override_settings(DATABASE_ROUTERS=[JobsOnThePrimary()], DJANGO_JOBS={
            "READ_REPLICA": STANDBY, "READ_REPLICA_MAX_LAG_SECONDS": 1,
            "READ_REPLICA_FALLBACK_SECONDS": 2}):
        Job.objects.all().delete()
        read_replica.forget()
        try:
            yield pair
        finally:
            read_replica.forget()
            for alias in (PRIMARY, STANDBY):
                connections[alias].close()


@pytest.fixture
def admin_client(client):
    client.force_login(staff("root", superuser=True))
    return client


def read_on(alias: str):
    return CaptureQueriesContext(connections[alias])


def job_reads(captured) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if "django_jobs_job" in q["sql"]]


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "django_jobs.reads" and r.levelno == logging.WARNING]


@on_the_pair
def test_a_stopped_standby_costs_freshness_not_pages(site, admin_client, caplog):
    dead = make_job("dead")
    api = Api(make_token("read"))
    wait_for(site.caught_up, timeout=60)
    with read_on(STANDBY) as standby:
        assert admin_client.get(LIST).status_code == 200
    assert job_reads(standby), "the list read the standby while it was up"

    site.standby.crash()
    with caplog.at_level(logging.INFO, logger="django_jobs.reads"):
        listed = admin_client.get(LIST)
        overview = admin_client.get(OVERVIEW)
        # the admin's retry action redirects to the list, which still answers
        retried = admin_client.post(LIST, {"action": "retry_jobs", ACTION_CHECKBOX_NAME: [dead.pk],
                                           "index": 0}, follow=True)
        api_list = api.get("/api/jobs")
        as_json = api.get("/api/metrics/jobs")
        as_text = api.get("/api/metrics/jobs", format="prometheus")

    assert listed.status_code == 200 and dead.public_id in listed.content.decode()
    assert overview.status_code == 200
    assert retried.status_code == 200 and retried.redirect_chain[-1][0].endswith(LIST)
    for page in (listed, overview, retried):
        assert NOTE in page.content.decode()
    assert Job.objects.get(pk=dead.pk).status == Job.Status.PENDING
    assert [r["job_id"] for r in api_list.json()["results"]] == [dead.public_id]
    replica = as_json.json()["read_replica"]
    assert replica["read_from"] == "primary" and replica["reason"].startswith("failed (")
    assert "django_jobs_read_replica_fallback 1\n" in as_text.content.decode()
    assert len(warnings_of(caplog)) == 1, warnings_of(caplog)


@on_the_pair
def test_a_page_that_fails_on_the_stopped_standby_is_made_on_the_primary(site, admin_client):
    """Without a lag bound nothing checks the standby before the page: the page's own first
    read fails, and the page is made again from the primary."""
    job = make_job("pending")
    site.standby.crash()
    with override_settings(DJANGO_JOBS={"READ_REPLICA": STANDBY,
                                        "READ_REPLICA_MAX_LAG_SECONDS": None}), \
            read_on(PRIMARY) as primary:
        listed = admin_client.get(LIST)
        overview = admin_client.get(OVERVIEW)
        api_list = Api(make_token("read")).get("/api/jobs")
    assert listed.status_code == 200 and job.public_id in listed.content.decode()
    assert overview.status_code == 200 and NOTE in overview.content.decode()
    assert [r["job_id"] for r in api_list.json()["results"]] == [job.public_id]
    assert job_reads(primary)


@on_the_pair
def test_a_standby_that_stops_mid_page_leaves_the_page_to_the_primary(site, admin_client):
    """The standby answers the page's first read of the jobs and is stopped right after it: a
    later read fails, and the whole page is made again from the primary."""
    job = make_job("dead")
    wait_for(site.caught_up, timeout=60)
    answered = []

    def stop_after_the_first_read(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if not answered and "django_jobs_job" in sql:
            answered.append(sql)
            site.standby.crash()
        return result

    with override_settings(DJANGO_JOBS={"READ_REPLICA": STANDBY,
                                        "READ_REPLICA_MAX_LAG_SECONDS": None}), \
            connections[STANDBY].execute_wrapper(stop_after_the_first_read), \
            read_on(PRIMARY) as primary:
        listed = admin_client.get(LIST)
    assert answered, "the standby answered a read of the page"
    assert listed.status_code == 200 and job.public_id in listed.content.decode()
    assert NOTE in listed.content.decode()
    assert job_reads(primary), "the page was made again from the primary"


@on_the_pair
def test_the_standby_is_read_again_once_it_is_back(site, admin_client, caplog):
    site.standby.crash()
    with caplog.at_level(logging.INFO, logger="django_jobs.reads"):
        assert NOTE in admin_client.get(LIST).content.decode()
        site.standby.start()
        time.sleep(2.5)  # READ_REPLICA_FALLBACK_SECONDS = 2
        with read_on(STANDBY) as standby:
            page = admin_client.get(LIST)
    assert page.status_code == 200 and NOTE not in page.content.decode()
    assert job_reads(standby)
    lines = [(r.levelname, r.getMessage()) for r in caplog.records
             if r.name == "django_jobs.reads"]
    assert [level for level, _ in lines] == ["WARNING", "INFO"], lines
    assert "again" in lines[-1][1]


@on_the_pair
def test_a_paused_standby_that_lags_costs_freshness_not_pages(site, admin_client, caplog):
    """Replay paused, the standby falls behind the jobs written since: past
    READ_REPLICA_MAX_LAG_SECONDS the pages read the primary, which has them."""
    make_job("completed")
    wait_for(site.caught_up, timeout=60)
    site.on_standby("SELECT pg_wal_replay_pause()")
    time.sleep(1.5)  # the last transaction the standby applied is older than the bound
    fresh = make_job("dead")
    wait_for(lambda: site.on_standby(
        "SELECT pg_last_wal_receive_lsn() > pg_last_wal_replay_lsn()")[0], timeout=60)
    (seen,) = site.on_standby(f"SELECT count(*) FROM django_jobs_job WHERE id = {fresh.pk}")
    assert seen == 0, "the paused standby does not have the new job"

    api = Api(make_token("read"))
    with caplog.at_level(logging.INFO, logger="django_jobs.reads"):
        listed = admin_client.get(LIST)
        as_json = api.get("/api/metrics/jobs").json()
        api_list = api.get("/api/jobs", status="dead")
    assert listed.status_code == 200 and fresh.public_id in listed.content.decode()
    assert NOTE in listed.content.decode() and "behind" in listed.content.decode()
    assert as_json["dead"] == 1
    assert as_json["read_replica"]["read_from"] == "primary"
    assert as_json["read_replica"]["lag_seconds"] > 1
    assert [r["job_id"] for r in api_list.json()["results"]] == [fresh.public_id]
    assert len(warnings_of(caplog)) == 1 and "behind" in warnings_of(caplog)[0]


@on_the_pair
def test_a_caught_up_standby_of_an_idle_primary_is_not_behind(site, admin_client):
    """An idle primary sends nothing to apply: however old the standby's last transaction,
    it is not lagging."""
    make_job("pending")
    wait_for(site.caught_up, timeout=60)
    time.sleep(1.5)  # older than READ_REPLICA_MAX_LAG_SECONDS = 1
    with read_on(STANDBY) as standby:
        page = admin_client.get(LIST)
    assert NOTE not in page.content.decode() and job_reads(standby)
    assert read_replica.last_lag() == 0.0


@on_the_pair
def test_the_api_answers_json_when_no_database_answers(site):
    """Both servers down: the API's reads answer a JSON 503, never Django's HTML page."""
    api = Api(make_token("read"), client=Client(raise_request_exception=False))
    site.standby.crash()
    site.primary.crash()
    for response in (api.get("/api/jobs"), api.get("/api/metrics/jobs"),
                     api.get("/api/jobs/j-00000000000000000000")):
        assert response.status_code == 503, response.content[:300]
        assert response["Content-Type"] == "application/json"
        assert response.json()["errors"] == {"database": "unavailable"}
        assert response["Retry-After"]
