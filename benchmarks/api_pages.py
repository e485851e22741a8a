"""The JSON API's list pages at 10k and 1M jobs on PostgreSQL or MariaDB: queries and time.

    DJANGO_JOBS_TEST_DB=postgres python benchmarks/api_pages.py [--rows 10000,1000000]
    DJANGO_JOBS_TEST_DB=mariadb python benchmarks/api_pages.py --rows 10000,1000000 --repeat 3

Fills a scratch database (``django_jobs_bench_api``, ``BENCH_DB_NAME``; dropped and
re-created) with the rows of ``benchmarks/admin_pages.py`` (90% completed, 5% dead, 2% failed,
2% pending, 1% canceled; five types, three queues; one job every two seconds), then gets each
page of ``GET /api/jobs`` with Django's test client and a real ``read`` token, as a client
does. The deep pages are reached as a client reaches them: the first page's ``next``, followed
nine times, is the 10th page; that page's ``previous`` is the way back. A cursor half way down
the table (the one a ``next`` link names for the job there) pages both ways from the middle.

For each page: the statements it sends (``CaptureQueriesContext``), the median time over the
repeats after one warm-up, and two ratios, both measured in this run: against the bare SQL of
one list page at the same size (the database's floor), and against the same page at the first
(smallest) size, which says whether the page grows with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "django_jobs_bench_api")

from benchmarks import admin_pages  # noqa: E402  sets up the settings module and database name

FILTERS: dict[str, dict[str, str]] = {
    "": {},
    "?status=failed": {"status": "failed"},
    "?status=failed&since=an hour ago": {"status": "failed", "since": "HOUR_AGO"},
    "?status=dead&since=a day ago": {"status": "dead", "since": "DAY_AGO"},
    "?type=webhook": {"type": "webhook"},
    # A type and a queue with no job: a page that walks the created index reads it all.
    "?type=nightly_report (none)": {"type": "nightly_report"},
    "?queue=reports (none)": {"queue": "reports"},
}
DEEP = ("", "?status=dead&since=a day ago")  # the filters whose 10th page and way back are timed


def timed(get, repeat: int) -> tuple[int, float, list[tuple[float, str]]]:
    """(statements, median seconds, the statements' times and SQL) of ``get()``, warmed up."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    get()
    with CaptureQueriesContext(connection) as captured:
        get()
    # Read now: the next request empties the connection's log the list is sliced from.
    log = [(float(q["time"]), q["sql"]) for q in captured.captured_queries]
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        get()
        times.append(time.perf_counter() - t0)
    return len(log), statistics.median(times), log


def urls() -> dict[str, str]:
    """Each page's path and query; the deep pages reached through ``next`` and ``previous``."""
    from django.utils import timezone

    now = timezone.now()
    ago = {"DAY_AGO": (now - timedelta(days=1)).isoformat(),
           "HOUR_AGO": (now - timedelta(hours=1)).isoformat()}
    pages: dict[str, str] = {}
    for name, params in FILTERS.items():
        query = {k: ago.get(v, v) for k, v in params.items()}
        pages[f"first page{' ' + name if name else ''}"] = "/api/jobs?" + urlencode(query)
    for name in DEEP:
        url = pages[f"first page{' ' + name if name else ''}"]
        for _ in range(9):  # fewer on a table too small for ten pages
            url = _link(url, "next") or url
        suffix = f" {name}" if name else ""
        pages[f"10th page (next x9){suffix}"] = url
        back = _link(url, "previous")
        if back:
            pages[f"9th page (10th's previous){suffix}"] = back
    # A cursor half way down the list, as its ``next`` names the job there: both directions.
    middle = _middle_cursor()
    pages["page from half way down (next)"] = "/api/jobs?" + urlencode({"cursor": middle})
    pages["page from half way down (previous)"] = "/api/jobs?" + urlencode(
        {"cursor": "n" + middle[1:]})
    pages["one job (GET /jobs/<id>), dead"] = f"/api/jobs/{_dead_job()}"
    pages["/metrics/jobs (JSON)"] = "/api/metrics/jobs"
    pages["/metrics/jobs?format=prometheus"] = "/api/metrics/jobs?format=prometheus"
    pages["/metrics/jobs?window=1h"] = "/api/metrics/jobs?window=1h"
    return pages


def _dead_job() -> str:
    """The public id of the newest dead job (on PostgreSQL, in a day partition)."""
    from django_jobs.models import Job

    return Job.objects.filter(status="dead").order_by("-pk").values_list(
        "public_id", flat=True)[0]


def _middle_cursor() -> str:
    from django_jobs.api.pagination import OLDER, Cursor
    from django_jobs.models import Job

    jobs = Job.objects.order_by("-created_at", "-pk")
    job = jobs[jobs.count() // 2]
    return Cursor(OLDER, job.created_at, job.pk).encode()


def _link(url: str, which: str) -> str | None:
    link = _get(url).json()[which]
    if link is None:
        return None
    parts = urlsplit(link)
    return f"{parts.path}?{parts.query}"


_client = None
_headers: dict[str, str] = {}


def _get(url: str):  # type: ignore[no-untyped-def]
    response = _client.get(url, headers=_headers)  # type: ignore[attr-defined]
    assert response.status_code == 200, (url, response.status_code, response.content[:300])
    return response


def _results(url: str) -> int | str:
    """The jobs a list page holds; ``-`` for the metrics and a job's own page."""
    response = _get(url)
    if "/metrics/" in url or "results" not in response.json():
        return "-"
    return len(response.json()["results"])


def run(rows_list: list[int], repeat: int, reuse: bool = False) -> list[dict]:
    global _client
    from django.contrib.auth.models import Group, User
    from django.test import Client
    from django.test.utils import override_settings

    from django_jobs.models import ApiToken

    filled = admin_pages.recreate(reuse)
    token, raw = ApiToken.generate("bench", ["read"])
    token.save()
    _client = Client()
    _headers["Authorization"] = f"Bearer {raw}"
    staff = Client()
    staff.force_login(User.objects.filter(username="bench").first()
                      or User.objects.create_superuser("bench", "bench@example.com", "pw"))
    for name in ("ops", "support", "billing"):
        Group.objects.get_or_create(name=name)
    results: list[dict] = []
    first: dict[str, float] = {}
    with override_settings(ROOT_URLCONF="tests.urls", DEBUG=False):
        for rows in rows_list:
            filled = admin_pages.grow(filled, rows)
            rows = filled
            _, raw_seconds, _ = timed(admin_pages.raw_page, repeat)
            results.append({"rows": rows, "page": "baseline: raw page SELECT", "queries": 1,
                             "seconds": raw_seconds})
            group_q, group, _ = timed(lambda: staff.get("/admin/auth/group/"), repeat)
            results.append({"rows": rows, "page": "baseline: auth.Group changelist",
                            "queries": group_q, "seconds": group, "load": admin_pages.load()})
            pages = urls()
            for name, url in pages.items():
                queries, seconds, log = timed(lambda u=url: _get(u), repeat)
                first.setdefault(name, seconds)
                results.append({
                    "rows": rows, "page": name, "url": url, "queries": queries,
                    "results": _results(url), "seconds": seconds,
                    "x_raw": seconds / raw_seconds, "x_group": seconds / group,
                    "x_first_size": seconds / first[name],
                    "slowest": [(round(t * 1000, 1), sql[:300]) for t, sql in
                                sorted(log, reverse=True)[:3]],
                })
            results += new_connections(staff, pages, rows, repeat)
    return results


# Pages measured again on a new database connection each, as a site with Django's default
# CONN_MAX_AGE = 0 serves every request (``admin_pages.NEW_CONNECTION_PAGES``).
NEW_CONNECTION_PAGES = ("first page", "one job (GET /jobs/<id>), dead")


def new_connections(staff: Any, pages: dict[str, str], rows: int, repeat: int) -> list[dict]:
    """The Group changelist and ``NEW_CONNECTION_PAGES``, each request on a new connection."""
    from django.db import connection

    def fresh(get: Callable[[], object]) -> Callable[[], object]:
        def call() -> object:
            connection.close()
            return get()
        return call

    queries, group, _ = timed(fresh(lambda: staff.get("/admin/auth/group/")), repeat)
    results = [{"rows": rows, "page": "baseline: auth.Group changelist, new connection",
                "queries": queries, "seconds": group}]
    for name in NEW_CONNECTION_PAGES:
        queries, seconds, _ = timed(fresh(lambda u=pages[name]: _get(u)), repeat)
        results.append({"rows": rows, "page": f"{name}, new connection", "queries": queries,
                        "seconds": seconds, "x_group": seconds / group})
    return results


def table(results: list[dict]) -> str:
    lines = ["| rows | page | queries | results | ms per page | x raw SELECT | x Group list "
             "| x smallest |", "| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        ratios = (f"{r['x_raw']:.1f} | {r['x_group']:.1f} | {r['x_first_size']:.2f}"
                  if "x_raw" in r else f"- | {r['x_group']:.1f} | -" if "x_group" in r
                  else "- | - | -")
        lines.append(f"| {r['rows']:,} | {r['page']} | {r['queries']} | {r.get('results', '-')} "
                     f"| {r['seconds'] * 1000:.1f} | {ratios} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="10000,1000000",
                        help="comma-separated table sizes, ascending")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--reuse", action="store_true",
                        help="keep the scratch database's jobs if it has some")
    args = parser.parse_args()
    import django
    from django.test.utils import setup_test_environment

    django.setup()
    setup_test_environment()  # the test client's host; nothing else
    results = run([int(n) for n in args.rows.split(",")], args.repeat, args.reuse)
    print(table(results))
    print(f"load average at the end: {admin_pages.load()}")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    vendor = os.environ["DJANGO_JOBS_TEST_DB"]
    (out / f"api_pages_{vendor}.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
