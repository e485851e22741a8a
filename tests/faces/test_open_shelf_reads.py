"""The pages' reads of open jobs name the open shelf (``JobQuerySet.open_shelf``), so that on
PostgreSQL's partitioned jobs table each is planned on the open partition alone, not on every
day partition: the admin's list strip, filters and overview, the API's list and metrics.

Every statement a page sends that looks for open states only (pending, processing, failed,
waiting) is checked for the condition, and its plan for the partitions it reads."""

import json
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from django_jobs.core.shelves import FINISHED
from django_jobs.core.states import JobStatus
from tests.admin_helpers import make_job, staff
from tests.api_support import Api, make_token
from tests.conftest import requires_postgres

pytestmark = [requires_postgres, pytest.mark.django_db]

OPEN = {status for status in JobStatus.values if status not in FINISHED}
STATUS = re.compile(r""""django_jobs_job"\."status" (?:= '(\w+)'|IN \(([^)]*)\))""")
SHELF = """"django_jobs_job"."shelf" < '2000-01-01'"""


def open_only(sql: str) -> bool:
    """Whether ``sql`` reads the jobs table for open states only (every status it names)."""
    named: set[str] = set()
    for one, several in STATUS.findall(sql):
        named |= {one} if one else {s.strip(" '") for s in several.split(",")}
    return bool(named) and named <= OPEN


def partitions_read(sql: str) -> set[str]:
    """The jobs table's partitions in ``sql``'s plan."""
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN (FORMAT json) {sql}")
        plan = cursor.fetchone()[0]
    text = json.dumps(plan if not isinstance(plan, str) else json.loads(plan))
    return set(re.findall(r'"Relation Name": "(django_jobs_job_\w+)"', text))


def checked(statements: list[str]) -> int:
    """Checks each open-states read of ``statements``; how many there were."""
    reads = [sql for sql in statements if open_only(sql) and not sql.startswith("EXPLAIN")]
    for sql in reads:
        assert SHELF in sql, sql
        assert partitions_read(sql) == {"django_jobs_job_open"}, sql
    return len(reads)


@pytest.mark.parametrize("url", [
    "/admin/django_jobs/job/",
    "/admin/django_jobs/job/?status__exact=pending",
    "/admin/django_jobs/job/?status__exact=processing",
    "/admin/django_jobs/job/overview/",
])
def test_the_admins_reads_of_open_jobs_are_planned_on_the_open_partition(client, url):
    for status in ("pending", "failed", "processing", "dead", "completed"):
        make_job(status=status)
    client.force_login(staff("ops", superuser=True))
    with CaptureQueriesContext(connection) as queries:
        assert client.get(url).status_code == 200
    assert checked([q["sql"] for q in queries.captured_queries]) >= 3


@pytest.mark.parametrize(("path", "params"), [
    ("/api/metrics/jobs", {}), ("/api/jobs", {"status": "pending,failed"}),
])
def test_the_apis_reads_of_open_jobs_are_planned_on_the_open_partition(path, params):
    for status in ("pending", "failed", "processing", "dead"):
        make_job(status=status)
    api = Api(make_token("read"))
    with CaptureQueriesContext(connection) as queries:
        assert api.get(path, **params).status_code == 200
    assert checked([q["sql"] for q in queries.captured_queries]) >= 1


def test_a_read_of_finished_states_is_left_as_it_is():
    """A finished job is on a day's shelf, or on the open partition's history from before the
    table was partitioned: such a read names no shelf."""
    from django_jobs.models import Job

    def where(*states: str) -> str:
        return str(Job.objects.in_states(*states).values("pk").query).partition("WHERE")[2]

    assert "shelf" not in where("dead", "pending") and "shelf" not in where("completed")
    assert "shelf" in where("pending", "failed") and "shelf" in where("waiting")
