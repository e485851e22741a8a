"""The overview's charts (``admin/charts.py``, ``admin/svg.py``): drawn from the counts of
finished jobs a worker's run wrote, filtered by queue and type, never reading the jobs table;
the wait's percentiles read from the histogram."""

from __future__ import annotations

import math
import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from hypothesis import given
from hypothesis import strategies as st

from django_jobs.admin import charts, svg
from django_jobs.core import clock
from django_jobs.engine import finish_counts
from django_jobs.models import Job, JobStat
from django_jobs.models.stats import WAIT_BOUNDS, WAIT_FIELDS
from tests.helpers import run_burst

OVERVIEW = "/admin/django_jobs/job/overview/"


def bars(html: str, chart: str) -> dict[str, int]:
    """The jobs a bar chart of the page shows, summed by outcome."""
    figure = re.search(rf'<figure id="{chart}">(.*?)</figure>', html, re.S).group(1)
    found: dict[str, int] = {}
    for outcome, n in re.findall(r'dj-jobs-bar-(\w+)"[^>]*data-count="(\d+)"', figure):
        found[outcome] = found.get(outcome, 0) + int(n)
    return found


def run_and_count(capture) -> int:
    """``run_burst``, its finishes' steps on commit run as their commits would (the test's
    transaction never commits), then the counts kept written, as the worker's stop writes them."""
    with capture(execute=True):
        ran = run_burst()
    finish_counts.flush()
    return ran


@pytest.mark.django_db
def test_the_charts_show_what_a_worker_ran(viewer, django_capture_on_commit_callbacks):
    for _ in range(3):
        Job.enqueue("noop")
    Job.enqueue("echo", {"x": 1}, queue="mail")
    Job.enqueue("permanent", queue="mail")
    assert run_and_count(django_capture_on_commit_callbacks) == 5
    html = viewer.get(OVERVIEW).content.decode()
    for chart in ("chart-hour", "chart-day"):
        assert bars(html, chart) == {"completed": 4, "dead": 1}
    assert html.count('class="dj-jobs-line dj-jobs-line-p50"') == 2
    assert 'class="dj-jobs-point dj-jobs-point-p95"' in html
    by_queue = viewer.get(OVERVIEW, {"queue": "mail"}).content.decode()
    assert bars(by_queue, "chart-hour") == {"completed": 1, "dead": 1}
    by_type = viewer.get(OVERVIEW, {"queue": "mail", "type": "permanent"}).content.decode()
    assert bars(by_type, "chart-day") == {"dead": 1}
    none = viewer.get(OVERVIEW, {"type": "no_such_type"}).content.decode()
    assert bars(none, "chart-hour") == {} and "No job finished" in none
    assert '<option value="no_such_type" selected>' in none


@pytest.mark.django_db
def test_the_charts_read_only_the_counts(django_capture_on_commit_callbacks):
    Job.enqueue("noop")
    run_and_count(django_capture_on_commit_callbacks)
    with CaptureQueriesContext(connection) as queries:
        made = charts.context({"queue": "default", "type": "noop"})
    tables = " ".join(q["sql"] for q in queries.captured_queries)
    assert "django_jobs_jobstat" in tables
    assert not re.search(r'django_jobs_job\b(?!stat)|"django_jobs_job"', tables)
    assert made["charts"]["hour_total"]["completed"] == 1


@pytest.mark.django_db
def test_names_are_escaped(viewer):
    now = clock.now(Job.objects.db)
    for span, start in ((1, finish_counts.bucket(now)), (60, finish_counts.hour(now))):
        JobStat.objects.create(span=span, bucket=start, worker_id="w", queue="<q>",
                               type='"><script>x()</script>', outcome="completed", count=2,
                               wait_le_0=2)
    html = viewer.get(OVERVIEW, {"queue": "<q>"}).content.decode()
    assert "<script>x()" not in html
    assert "&lt;script&gt;x()" in html
    assert bars(html, "chart-hour") == {"completed": 2}


@pytest.mark.django_db
def test_the_charts_are_empty_and_say_so_when_counting_is_off(viewer, settings):
    settings.DJANGO_JOBS = {**settings.DJANGO_JOBS, "STATS": False}
    Job.enqueue("noop")
    run_burst()
    html = viewer.get(OVERVIEW).content.decode()
    assert "STATS = False" in html and bars(html, "chart-hour") == {}


def nearest_rank(values: list[int], q: float) -> int:
    return sorted(values)[max(math.ceil(q * len(values)), 1) - 1]


def bounds_of(bucket: int) -> tuple[float, float]:
    low = WAIT_BOUNDS[bucket - 1] if bucket else 0.0
    high = WAIT_BOUNDS[bucket] if bucket < len(WAIT_BOUNDS) else WAIT_BOUNDS[-1]
    return low, high


@given(waits=st.lists(st.one_of(st.integers(0, 4_000_000_000),
                                st.sampled_from([int(b * 1e6) for b in WAIT_BOUNDS])),
                      min_size=1, max_size=200),
       q=st.sampled_from([0.5, 0.95, 0.99, 0.01]))
def test_a_percentile_falls_in_the_bucket_of_the_true_one(waits, q):
    histogram = [0] * len(WAIT_FIELDS)
    for us in waits:
        histogram[finish_counts.wait_bucket(us)] += 1
    estimate = charts.quantile(histogram, q)
    low, high = bounds_of(finish_counts.wait_bucket(nearest_rank(waits, q)))
    assert low <= estimate <= high


@given(histogram=st.lists(st.integers(0, 50), min_size=len(WAIT_FIELDS),
                          max_size=len(WAIT_FIELDS)))
def test_p50_is_at_most_p95(histogram):
    p50, p95 = charts.quantile(histogram, 0.5), charts.quantile(histogram, 0.95)
    assert (p50 is None) == (p95 is None) == (sum(histogram) == 0)
    if p50 is not None:
        assert p50 <= p95


@given(st.floats(min_value=1e-6, max_value=1e9))
def test_the_scale_is_a_round_number_above_the_highest_value(value):
    top = svg.nice_ceiling(value)
    assert value <= top * (1 + 1e-9) and top < value * 4.0001
