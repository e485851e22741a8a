"""MariaDB: the job lists (admin, API) walk an index in their order and estimate large counts."""

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.utils import timezone

from django_jobs.admin.overview_figures import INDEXED_OPEN_STATES, overview, summary
from django_jobs.admin.paginator import EstimatedCountPaginator, planner_estimate
from django_jobs.engine.mariadb.schema import (
    COVERING_STATUS_INDEX,
    FILTER_INDEXES,
    LIST_INDEXES,
    READY_INDEX,
    TABLE,
)
from django_jobs.models import Job
from tests.admin_helpers import staff
from tests.api_support import Api, make_token, page_queries

# ANALYZE TABLE commits, so these tests run without a test transaction around them.
pytestmark = pytest.mark.django_db(transaction=True)
STATUSES = ("completed", "dead", "failed", "pending", "canceled", "processing")


@pytest.fixture(autouse=True)
def mariadb():
    if connection.vendor != "mysql":
        pytest.skip("MariaDB and MySQL only: PostgreSQL's list plans are in test_indexes.py")


@pytest.fixture
def many_jobs() -> None:
    """Enough rows, of every state and large enough, that reading and sorting them all would
    cost more than an index walk."""
    now = timezone.now()
    pad = "x" * 2000
    Job.objects.bulk_create(
        (Job(type="echo", status=STATUSES[n % len(STATUSES)],
             created_at=now - timedelta(seconds=n), run_at=now, payload={"pad": pad})
         for n in range(3000)),
        batch_size=500,
    )
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE TABLE {TABLE}")
        cursor.fetchall()


def explain(sql: str, params) -> list[dict]:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        names = [column[0] for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def assert_walks_index(queries: list[tuple[str, tuple]], index: str) -> None:
    assert queries
    for sql, params in queries:
        [plan] = explain(sql, params)
        assert plan["key"] == index, plan
        assert "filesort" not in (plan["Extra"] or ""), plan


def test_the_list_indexes_end_in_id():
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, TABLE)
    built = {**{name: columns for name, (columns, _) in LIST_INDEXES.items()},
             READY_INDEX[0]: READY_INDEX[1], COVERING_STATUS_INDEX[0]: COVERING_STATUS_INDEX[1],
             **FILTER_INDEXES}
    for name, columns in built.items():
        expected = [c.strip() for c in columns.split(",")]
        assert constraints[name]["columns"] == expected, name


def test_the_lists_date_range_is_read_from_the_ends_of_an_index(client, many_jobs):
    client.force_login(staff("viewer", "view_job"))
    sent: list[tuple[str, tuple]] = []
    with connection.execute_wrapper(lambda ex, sql, p, *a: sent.append((sql, p)) or ex(sql, p, *a)):
        client.get("/admin/django_jobs/job/")
    [(sql, params)] = [(sql, p) for sql, p in sent if "MIN(" in sql and "created_at" in sql]
    [plan] = explain(sql, params)
    assert plan["Extra"] == "Select tables optimized away", plan


def sent_by(get) -> list[tuple[str, tuple]]:
    sent: list[tuple[str, tuple]] = []
    with connection.execute_wrapper(lambda ex, sql, p, *a: sent.append((sql, p)) or ex(sql, p, *a)):
        get()
    return sent


# Filters whose matches are found row by row: a type or a queue with another condition, a search.
UNINDEXED_FILTERS = [
    {"type": "echo", "priority": "normal"}, {"queue": "default", "has_error": "no"},
    {"q": "nowhere"},
]


@pytest.mark.parametrize("params", UNINDEXED_FILTERS, ids=["type", "queue", "search"])
def test_a_large_filtered_lists_date_range_is_read_from_the_ends_of_an_index(
        client, many_jobs, monkeypatch, params):
    """``MIN``/``MAX`` of the matches of such a filter would read every match."""
    monkeypatch.setattr(EstimatedCountPaginator, "exact_below_rows", 100)  # 3,000 rows is large
    client.force_login(staff("viewer", "view_job"))
    sent = sent_by(lambda: client.get("/admin/django_jobs/job/", params))
    [(sql, params)] = [(sql, p) for sql, p in sent if "MIN(" in sql and "created_at" in sql]
    [plan] = explain(sql, params)
    assert plan["Extra"] == "Select tables optimized away", plan


@pytest.mark.parametrize(("field", "index"), [("type", "django_jobs_type_my"),
                                              ("queue", "django_jobs_queue_my")])
def test_a_list_of_a_rare_type_or_queue_walks_its_index_without_a_sort(
        client, many_jobs, field, index):
    """Walking the created index until 50 rows match would read the whole table."""
    now = timezone.now()
    Job.objects.bulk_create(Job(**{"type": "echo", field: "rare"}, created_at=now)
                            for _ in range(60))  # two pages
    client.force_login(staff("viewer", "view_job"))
    responses = []
    queries = page_queries(lambda: responses.append(
        client.get("/admin/django_jobs/job/", {field: "rare"})))
    assert responses[0].status_code == 200 and len(responses[0].context["cl"].result_list) == 50
    assert_walks_index(queries, index)
    api = Api(make_token("read"))
    first = api.get("/api/jobs", **{field: "rare"}, limit=50)
    assert len(first.json()["results"]) == 50
    cursor = parse_qs(urlsplit(first.json()["next"]).query)["cursor"][0]
    for params in ({}, {"cursor": cursor}):
        queries = page_queries(lambda p=params: api.get("/api/jobs", **{field: "rare"}, **p))
        assert_walks_index(queries, index)


def rows_read(sql: str, params) -> int:
    """Rows (index entries or table rows) InnoDB hands over while running ``sql``."""
    with connection.cursor() as cursor:
        cursor.execute("FLUSH STATUS")
        cursor.execute(sql, params)
        cursor.fetchall()
        cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read%%'")
        return sum(int(value) for _, value in cursor.fetchall())


@pytest.mark.parametrize("counted", [True, False], ids=["counted", "estimated"])
def test_a_free_text_search_reads_the_newest_jobs_only(client, many_jobs, monkeypatch, counted):
    """A rare word would otherwise be looked for in every row, by the count and by the page."""
    from django_jobs.admin.job_admin import JobAdmin

    monkeypatch.setattr(JobAdmin, "search_window", 100)
    if not counted:
        monkeypatch.setattr(EstimatedCountPaginator, "exact_below_rows", 10)
    client.force_login(staff("viewer", "view_job"))
    sent = sent_by(lambda: client.get("/admin/django_jobs/job/", {"q": "nowhere"}))
    searches = [(sql, params) for sql, params in sent
                if "%nowhere%" in params and not sql.startswith("EXPLAIN")]
    assert searches
    # The count reads each row of the window about three times over (index entry, row, check);
    # the whole table would be 3,000 rows, 9,000 reads.
    assert sum(rows_read(sql, params) for sql, params in searches) <= 400


def table_plans(sql: str, params) -> list[dict]:
    """The plan's rows that read the jobs table (not a derived table built from it)."""
    return [row for row in explain(sql, params) if row["table"] == TABLE]


def test_the_ready_count_and_the_oldest_read_the_ready_index_alone(many_jobs):
    sent: list[tuple[str, tuple]] = []
    with connection.execute_wrapper(lambda ex, sql, p, *a: sent.append((sql, p)) or ex(sql, p, *a)):
        summary()
    ready = [(sql, p) for sql, p in sent if "run_at" in sql and not sql.startswith("EXPLAIN")]
    assert len(ready) == 3  # the capped count, the oldest pending and the oldest failed job
    for sql, params in ready:
        [plan] = table_plans(sql, params)
        assert plan["key"] == READY_INDEX[0] and "Using index" in plan["Extra"], plan


def test_the_overview_counts_from_the_status_index_alone(many_jobs):
    """Looking up each counted row in the table took 0.9 s for 100,000 open jobs."""
    sent = sent_by(overview)
    grouped = [(sql, p) for sql, p in sent
               if "GROUP BY" in sql and f"`{TABLE}`" in sql and "processing" not in map(str, p)]
    # Per state but processing (the lease index), and the completed jobs of the last day: the
    # newest jobs grouped, then, being fewer than the sample, all of them grouped with their
    # oldest due job.
    assert len(grouped) == 2 * (len(INDEXED_OPEN_STATES) + 1)
    for sql, params in grouped:
        [plan] = table_plans(sql, params)
        assert plan["key"] == "django_jobs_status_idx" and "Using index" in plan["Extra"], plan


def test_the_admin_list_walks_the_created_index_without_a_sort(client, many_jobs):
    client.force_login(staff("viewer", "view_job"))
    queries = page_queries(lambda: client.get("/admin/django_jobs/job/"))
    assert_walks_index(queries, "django_jobs_created_idx")


@pytest.mark.parametrize("status", STATUSES)
def test_a_list_by_status_walks_the_status_index_without_a_sort(client, many_jobs, status):
    client.force_login(staff("viewer", "view_job"))
    queries = page_queries(
        lambda: client.get("/admin/django_jobs/job/", {"status__exact": status}))
    assert_walks_index(queries, "django_jobs_status_idx")


def test_the_api_pages_both_ways_without_a_sort(many_jobs):
    api = Api(make_token("read"))
    first = api.get("/api/jobs", status="dead", limit=5)
    cursor = parse_qs(urlsplit(first.json()["next"]).query)["cursor"][0]
    second = api.get("/api/jobs", status="dead", limit=5, cursor=cursor)
    back = parse_qs(urlsplit(second.json()["previous"]).query)["cursor"][0]
    for params in ({"cursor": cursor}, {"cursor": back}):
        queries = page_queries(lambda p=params: api.get("/api/jobs", status="dead", limit=5, **p))
        assert_walks_index(queries, "django_jobs_status_idx")
    queries = page_queries(lambda: api.get("/api/jobs", limit=5, cursor=cursor))
    assert_walks_index(queries, "django_jobs_created_idx")


class TinyThresholds(EstimatedCountPaginator):
    """Thresholds scaled down so a test table of a few thousand rows counts as "huge"."""

    exact_below_rows = 100


def test_a_large_list_shows_mariadbs_estimate_without_counting(many_jobs):
    paginator = TinyThresholds(Job.objects.order_by("-created_at", "-pk"), 50)
    sent: list[str] = []
    with connection.execute_wrapper(lambda ex, sql, *a: sent.append(sql) or ex(sql, *a)):
        count = paginator.count
    assert paginator.count_is_estimate
    assert 2000 <= count <= 4000  # InnoDB's sampled statistics, not the exact 3,000
    assert not [sql for sql in sent if "COUNT(" in sql.upper()]


def test_a_selective_filter_is_counted_exactly(many_jobs):
    job = Job.objects.filter(status="dead").first()
    paginator = TinyThresholds(Job.objects.filter(public_id=job.public_id).order_by("-pk"), 50)
    assert paginator.count == 1 and not paginator.count_is_estimate


def test_a_scan_that_expects_few_rows_is_still_estimated(many_jobs):
    """A rare word is expected to match little, but finding it reads every row."""
    estimate = planner_estimate(Job.objects.filter(payload__icontains="nowhere"))
    assert estimate is not None and estimate.read >= 2000
    paginator = TinyThresholds(Job.objects.filter(payload__icontains="nowhere").order_by("-pk"),
                               50)
    paginator.count  # noqa: B018
    assert paginator.count_is_estimate


def test_a_search_with_quotes_and_backslashes_is_estimated_and_listed(client, many_jobs):
    client.force_login(staff("viewer", "view_job"))
    response = client.get("/admin/django_jobs/job/", {"q": 'it\'s "x" \\ user42%'})
    assert response.status_code == 200


@pytest.mark.parametrize("status", ["failed", "dead", "failed,dead"])
def test_a_list_since_a_time_reads_the_failed_and_dead_jobs_index(many_jobs, status):
    """``GET /jobs?status=failed&since=``: the page's statement offers the planner the virtual
    column's index, where the status index would read every failed job's row for its
    ``updated_at``, and lists the same jobs as the plain filter, an old failed job, a recent
    pending one and a recent dead or failed one of the other status among them. (Which index
    the planner takes on a table of a few thousand rows varies with InnoDB's sampled
    statistics; at a million rows and more it takes this one: ``benchmarks/api_pages.py``.)"""
    now = timezone.now()
    # Thousands of failed and dead jobs written days ago, a few of each lately: as a site has
    # them, and enough that the planner's choice is not a toss-up.
    Job.objects.filter(status__in=("failed", "dead")).update(updated_at=now - timedelta(days=3))
    Job.objects.bulk_create(
        (Job(type="echo", status=("failed", "dead")[n % 2], created_at=now - timedelta(days=4),
             updated_at=now - timedelta(days=3)) for n in range(4000)), batch_size=1000)
    for name in ("failed", "dead", "pending"):
        Job.objects.bulk_create(
            Job(type="echo", status=name, created_at=now - timedelta(days=2 * (n % 2)),
                updated_at=now - timedelta(hours=3 * (n % 2))) for n in range(10))
    api = Api(make_token("read"))
    since = (now - timedelta(hours=1)).isoformat()
    queries = page_queries(lambda: api.get("/api/jobs", status=status, since=since, limit=5))
    assert queries
    for sql, params in queries:
        [plan] = table_plans(sql, params)
        assert "django_jobs_updated_my" in plan["possible_keys"].split(","), plan
    listed, cursor = [], None
    while True:
        body = api.get("/api/jobs", status=status, since=since, limit=5,
                       **({"cursor": cursor} if cursor else {})).json()
        listed += [job["job_id"] for job in body["results"]]
        if not body["next"]:
            break
        cursor = parse_qs(urlsplit(body["next"]).query)["cursor"][0]
    expected = Job.objects.filter(status__in=status.split(","), updated_at__gte=now - timedelta(
        hours=1)).order_by("-created_at", "-pk").values_list("public_id", flat=True)
    assert listed == list(expected) and len(listed) == 5 * len(status.split(","))


def test_a_claim_and_a_finish_write_no_entry_of_the_failed_and_dead_jobs_index():
    """The virtual column is NULL outside the failed and dead states: only those jobs have a
    value in it."""
    job = Job.enqueue("echo")
    Job.objects.filter(pk=job.pk).update(status="processing", updated_at=timezone.now())
    Job.objects.filter(pk=job.pk).update(status="completed", updated_at=timezone.now())
    failed = Job.enqueue("echo")
    Job.objects.filter(pk=failed.pk).update(status="failed", updated_at=timezone.now())
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT id FROM {TABLE} FORCE INDEX (django_jobs_updated_my) "
                       "WHERE ended_updated_at IS NOT NULL")
        assert [row[0] for row in cursor.fetchall()] == [failed.pk]
