"""``READ_REPLICA``: the pages that only look read the replica; whatever acts reads and writes
the primary.

The ``replica`` alias of the test settings is a mirror of ``default`` in a test run: the same
test database through a connection of its own, so each connection's captured queries say
which alias a page read. A committed row is seen from both, hence ``transaction=True``.
"""

import logging
import re
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.db import connections
from django.test import override_settings
from django.test.utils import CaptureQueriesContext

from django_jobs.checks.configuration import check_settings
from django_jobs.engine import read_replica
from django_jobs.models import Job
from tests.admin_helpers import job_url, make_job, staff
from tests.api_support import Api, make_token

LIST = "/admin/django_jobs/job/"
OVERVIEW = "/admin/django_jobs/job/overview/"
# The tables a page about jobs reads (the API's tokens and the admin's users are the site's
# own business, on default).
JOB_TABLES = re.compile(r"\bdjango_jobs_(job|jobattempt|jobdependency|worker|queuestate)\b")

on_both = pytest.mark.django_db(transaction=True, databases=["default", "replica"])


def replica_settings(**extra):
    return override_settings(DJANGO_JOBS={**settings.DJANGO_JOBS, "READ_REPLICA": "replica",
                                          **extra})


class Reads:
    """The statements on the jobs' tables each alias ran while it was open."""

    def __init__(self, primary: CaptureQueriesContext, replica: CaptureQueriesContext) -> None:
        self._primary, self._replica = primary, replica

    @staticmethod
    def _of(captured: CaptureQueriesContext) -> list[str]:
        return [q["sql"] for q in captured.captured_queries if JOB_TABLES.search(q["sql"])]

    @property
    def primary(self) -> list[str]:
        return self._of(self._primary)

    @property
    def replica(self) -> list[str]:
        return self._of(self._replica)


@contextmanager
def reads():
    with CaptureQueriesContext(connections["default"]) as primary, \
            CaptureQueriesContext(connections["replica"]) as replica:
        yield Reads(primary, replica)


@pytest.fixture(autouse=True)
def fresh_replica_state():
    """What the process learned of a replica (set aside, its lag) is forgotten between tests."""
    read_replica.forget()
    yield
    read_replica.forget()


@pytest.fixture
def admin_client(client):
    client.force_login(staff("root", superuser=True))
    return client


@pytest.fixture(scope="module")
def gone(django_db_setup):
    """A replica no connection can open: the test database's server (or directory, for
    SQLite), asked for a database it does not have. Declared before a test's databases are
    set up (module scope), as a mirror so that no test run creates or flushes it."""
    alias = "gone"
    default = connections.settings["default"]
    name = ("/nonexistent-django-jobs-replica/replica.sqlite3"
            if default["ENGINE"].endswith("sqlite3") else "django_jobs_no_such_replica")
    connections.settings[alias] = {**default, "NAME": name,
                                   "TEST": {**default["TEST"], "NAME": name, "MIRROR": "default"}}
    try:
        yield alias
    finally:
        connections[alias].close()
        del connections[alias]
        del connections.settings[alias]


# The pages that only look.


@on_both
@pytest.mark.parametrize("query", [
    "", "?status__exact=dead", "?queue=mail&has_error=yes", "?type=echo", "?q=mailbox",
    "?q=j-00000000000000000000", "?created_at__gte=2000-01-01T00:00:00%2B00:00",
])
def test_the_job_list_reads_the_replica(admin_client, query):
    dead = make_job("dead", queue="mail")
    make_job("pending", queue="mail")
    make_job("completed")
    with replica_settings(), reads() as seen:
        response = admin_client.get(LIST + query)
    assert response.status_code == 200
    assert seen.replica, "the list read nothing from the replica"
    assert seen.primary == []
    if query in ("", "?status__exact=dead"):
        assert dead.public_id in response.content.decode()


@on_both
def test_without_a_replica_the_job_list_reads_the_primary(admin_client):
    make_job("dead")
    with reads() as seen:
        assert admin_client.get(LIST).status_code == 200
    assert seen.primary and seen.replica == []


@on_both
def test_the_overview_reads_the_replica(admin_client):
    make_job("pending", queue="mail", type="email")
    make_job("processing", queue="mail", type="email")
    make_job("dead", queue="default", type="pdf")
    make_job("completed", queue="default", type="pdf")
    with replica_settings(), reads() as seen:
        response = admin_client.get(OVERVIEW)
    assert response.status_code == 200
    queues = {r.name: r.counts for r in response.context["queues"]}
    assert queues["mail"]["pending"] == 1 and queues["mail"]["processing"] == 1
    assert queues["default"]["dead"] == 1 and queues["default"]["completed"] == 1
    assert seen.replica and seen.primary == []


@on_both
def test_the_api_list_and_metrics_read_the_replica():
    job = Job.enqueue("echo", {"n": 1})
    api = Api(make_token("read"))
    with replica_settings(), reads() as seen:
        listed = api.get("/api/jobs", status="pending")
        as_json = api.get("/api/metrics/jobs")
        as_text = api.get("/api/metrics/jobs", format="prometheus")
    assert [r["job_id"] for r in listed.json()["results"]] == [job.public_id]
    assert as_json.json()["pending"] == 1
    assert 'django_jobs_jobs{status="pending"} 1' in as_text.content.decode()
    assert seen.replica and seen.primary == []


# A replica that fails costs freshness, not pages.


@pytest.mark.django_db(transaction=True, databases=["default", "gone"])
@pytest.mark.parametrize("lag_bound", [None, 60], ids=["no-lag-bound", "lag-bound"])
def test_a_replica_that_cannot_be_reached_costs_freshness_not_pages(
        admin_client, gone, lag_bound, caplog):
    """Unreachable, the replica is set aside: the pages read the primary and say so, once in
    the log. Without a lag bound the page's own first read fails and the page is made again on
    the primary; with one (PostgreSQL) the lag check finds it first."""
    dead = make_job("dead", queue="mail")
    api = Api(make_token("read"))
    with replica_settings(READ_REPLICA=gone, READ_REPLICA_MAX_LAG_SECONDS=lag_bound), \
            caplog.at_level(logging.INFO, logger="django_jobs.reads"):
        listed = admin_client.get(LIST)
        overview = admin_client.get(OVERVIEW)
        api_list = api.get("/api/jobs")
        as_json = api.get("/api/metrics/jobs")
        as_text = api.get("/api/metrics/jobs", format="prometheus")
    assert listed.status_code == 200 and overview.status_code == 200
    assert dead.public_id in listed.content.decode()
    for page in (listed, overview):
        assert 'id="read-replica"' in page.content.decode()
        assert "the replica &#x27;gone&#x27; failed" in page.content.decode()
    assert [r["job_id"] for r in api_list.json()["results"]] == [dead.public_id]
    replica = as_json.json()["read_replica"]
    assert replica["alias"] == gone and replica["read_from"] == "primary"
    assert replica["reason"].startswith("failed (")
    assert as_json.json()["dead"] == 1
    assert "django_jobs_read_replica_fallback 1\n" in as_text.content.decode()
    warnings = [r for r in caplog.records if r.name == "django_jobs.reads"]
    assert [r.levelname for r in warnings] == ["WARNING"], "one line for the one switch"


@on_both
def test_a_replica_that_answers_is_read_and_the_metrics_say_so(admin_client):
    make_job("pending")
    with replica_settings():
        page = admin_client.get(LIST).content.decode()
        replica = Api(make_token("read")).get("/api/metrics/jobs").json()["read_replica"]
        text = Api(make_token("read")).get("/api/metrics/jobs", format="prometheus")
    assert 'id="read-replica"' not in page
    assert replica == {"alias": "replica", "read_from": "replica", "reason": None,
                       "lag_seconds": replica["lag_seconds"]}
    assert "django_jobs_read_replica_fallback 0\n" in text.content.decode()


@pytest.mark.django_db
def test_without_a_replica_the_metrics_name_none():
    make_job("pending")
    response = Api(make_token("read")).get("/api/metrics/jobs", format="prometheus")
    assert "read_replica" not in response.content.decode()
    assert Api(make_token("read")).get("/api/metrics/jobs").json()["read_replica"] is None


@pytest.fixture(scope="module")
def bare(django_db_setup):
    """A database of the test server without the jobs' tables (PostgreSQL's ``postgres``,
    MariaDB's ``mysql``), declared as a mirror so that no test run creates or flushes it."""
    alias = "bare"
    default = connections.settings["default"]
    name = {"django.db.backends.postgresql": "postgres",
            "django.db.backends.mysql": "mysql"}.get(default["ENGINE"])
    if name is None:
        pytest.skip("a server's database without the jobs' tables: PostgreSQL or MariaDB")
    connections.settings[alias] = {**default, "NAME": name,
                                   "TEST": {**default["TEST"], "NAME": name, "MIRROR": "default"}}
    try:
        yield alias
    finally:
        connections[alias].close()
        del connections[alias]
        del connections.settings[alias]


class JobsOn:
    def __init__(self, alias: str) -> None:
        self.alias = alias

    def db_for_read(self, model, **hints):
        return self.alias if model._meta.app_label == "django_jobs" else None

    db_for_write = db_for_read


@pytest.mark.django_db(transaction=True, databases=["default", "bare"])
def test_what_a_view_raises_unexpectedly_is_answered_as_json(bare, caplog):
    """The jobs' database refuses the statement (no such table): a JSON 500, logged and
    signalled as Django does for the HTML page it would answer."""
    from django.core.signals import got_request_exception
    from django.test import Client

    client = Client(raise_request_exception=False)
    client.force_login(staff("root", superuser=True))
    signalled = []
    got_request_exception.connect(receiver := lambda **kw: signalled.append(kw["request"].path))
    try:
        with override_settings(DATABASE_ROUTERS=[JobsOn(bare)]), \
                caplog.at_level(logging.ERROR, logger="django.request"):
            response = client.get("/api/jobs")
    finally:
        got_request_exception.disconnect(receiver)
    assert response.status_code == 500 and response["Content-Type"] == "application/json"
    assert response.json()["errors"] == {"server": "error"}
    assert signalled == ["/api/jobs"]
    assert [r.exc_info is not None for r in caplog.records if r.name == "django.request"] == [True]


# What acts, and what leads to it, stays on the primary.


@on_both
def test_the_job_page_and_its_buttons_read_and_write_the_primary(admin_client):
    dead = make_job("dead")
    with replica_settings(), reads() as seen:
        assert admin_client.get(job_url(dead)).status_code == 200
        response = admin_client.post(f"{LIST}{dead.pk}/do/retry/")
    assert response.status_code == 302
    assert seen.replica == []
    assert seen.primary
    dead.refresh_from_db()
    assert dead.status == Job.Status.PENDING


@on_both
def test_a_list_action_reads_and_writes_the_primary(admin_client):
    dead = make_job("dead")
    pending = make_job("pending")
    with replica_settings(), reads() as seen:
        response = admin_client.post(LIST, {
            "action": "retry_jobs", ACTION_CHECKBOX_NAME: [dead.pk], "index": 0})
        canceled = admin_client.post(LIST, {
            "action": "cancel_jobs", ACTION_CHECKBOX_NAME: [pending.pk], "index": 0})
    assert response.status_code == 302 and canceled.status_code == 302
    assert seen.replica == []
    assert any(sql.lstrip().upper().startswith("UPDATE") for sql in seen.primary)
    assert Job.objects.get(pk=dead.pk).status == Job.Status.PENDING
    assert Job.objects.get(pk=pending.pk).status == Job.Status.CANCELED


@on_both
def test_pausing_a_queue_from_the_overview_writes_the_primary(admin_client):
    with replica_settings(), reads() as seen:
        response = admin_client.post(OVERVIEW + "queues/", {"queue": "mail", "op": "pause"})
    assert response.status_code == 302
    assert seen.replica == [] and seen.primary


@on_both
def test_the_api_submit_and_one_job_read_the_primary():
    api = Api(make_token("read", "submit"))
    with replica_settings(), reads() as seen:
        created = api.post("/api/jobs", {"type": "echo", "payload": {}})
        found = api.get(f"/api/jobs/{created.json()['job_id']}")
    assert created.status_code == 201 and found.status_code == 200
    assert seen.replica == [] and seen.primary


# The setting's check.


@pytest.mark.parametrize("value", ["nope", "", 3, ["replica"]])
def test_a_read_replica_not_in_databases_is_an_error(value):
    with override_settings(DJANGO_JOBS={"READ_REPLICA": value}):
        found = [p for p in check_settings() if p.id == "django_jobs.E040"]
    assert len(found) == 1
    assert "'default'" in found[0].hint


@pytest.mark.parametrize(("key", "value"), [
    ("READ_REPLICA_MAX_LAG_SECONDS", 0), ("READ_REPLICA_MAX_LAG_SECONDS", "60"),
    ("READ_REPLICA_FALLBACK_SECONDS", None), ("READ_REPLICA_FALLBACK_SECONDS", -1),
    ("READ_REPLICA_FALLBACK_SECONDS", True),
])
def test_a_lag_bound_or_fallback_time_that_is_no_number_of_seconds_is_an_error(key, value):
    with override_settings(DJANGO_JOBS={key: value}):
        found = [p for p in check_settings() if p.id == "django_jobs.E041"]
    assert len(found) == 1 and key in found[0].msg


@pytest.mark.parametrize(("key", "value"), [
    ("READ_REPLICA_MAX_LAG_SECONDS", None), ("READ_REPLICA_MAX_LAG_SECONDS", 0.5),
    ("READ_REPLICA_FALLBACK_SECONDS", 30),
])
def test_a_lag_bound_or_fallback_time_in_seconds_passes(key, value):
    with override_settings(DJANGO_JOBS={key: value}):
        assert not [p for p in check_settings() if p.id == "django_jobs.E041"]


@pytest.mark.parametrize("value", [None, "replica", "default"])
def test_a_read_replica_of_databases_or_none_passes(value):
    with override_settings(DJANGO_JOBS={"READ_REPLICA": value}):
        assert not [p for p in check_settings() if p.id == "django_jobs.E040"]
