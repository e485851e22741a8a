"""Admin pages at 10k and 1M jobs on PostgreSQL or MariaDB: queries per page and time per page.

    DJANGO_JOBS_TEST_DB=postgres python benchmarks/admin_pages.py [--rows 10000,1000000]
    DJANGO_JOBS_TEST_DB=mariadb python benchmarks/admin_pages.py  # benchmarks/admin_mariadb.py

Fills a scratch database (``django_jobs_bench_admin``, ``BENCH_DB_NAME``; dropped and
re-created) with a
server-side ``INSERT ... SELECT generate_series``, then renders each admin page with Django's
test client. Two baselines are measured in the same run, on the same data:

- ``raw page``: the bare SQL of one list page (``SELECT ... ORDER BY created_at DESC LIMIT 50``),
  the database's floor for any list;
- ``group list``: the stock admin changelist of ``auth.Group`` with three rows, the admin's
  own floor for rendering a page.

For contrast, ``naive`` rows render the same jobs with a plain ``ModelAdmin`` (exact counts,
``SELECT DISTINCT`` filters, Django's date hierarchy), as an app without these measures would.
Times are medians of several runs; ratios are against the baselines above.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB_NAME = os.environ.get("BENCH_DB_NAME", "django_jobs_bench_admin")
os.environ.setdefault("DJANGO_JOBS_TEST_DB", "postgres")
os.environ["JOBS_DB_NAME"] = DB_NAME
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")

import django  # noqa: E402

from benchmarks import admin_mariadb  # noqa: E402
from benchmarks.scratch import recreate_database  # noqa: E402

# The mix, per hundred rows: 90 finished (85 completed, 3 dead, 2 canceled), 10 open (4 pending
# and due, 2 pending and scheduled later, 2 failed and waiting to be retried, 2 processing).
# At 10M rows: 9M finished, 1M open. Forty types spread across the states, each in one of
# twelve queues (as a handler names its queue).
STATUS_SQL = """CASE WHEN mod(g, 100) < 85 THEN 'completed' WHEN mod(g, 100) < 88 THEN 'dead'
    WHEN mod(g, 100) < 90 THEN 'canceled' WHEN mod(g, 100) < 96 THEN 'pending'
    WHEN mod(g, 100) < 98 THEN 'failed' ELSE 'processing' END"""
BASE_TYPES = ("email_send", "invoice_pdf", "resize_image", "sync_crm", "webhook")
TYPES = 40  # the five above, and seven variants of each (``webhook_3``)
QUEUES = ("default", "mail", "media", "billing", "search", "sync", "export", "import",
          "notify", "thumbs", "ml", "audit")
FILL_SQL = f"""
INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue, run_at, attempt,
    max_attempts, result, error, created_at, updated_at, started_at, finished_at, worker_id,
    lease_token, leased_until, cancel_requested, callback_url, has_dependents, crashes, shelf)
SELECT 'j-' || lpad(to_hex(g), 20, '0'),
    (ARRAY{list(BASE_TYPES)})[1 + mod(g / 7, 5)]
        || CASE WHEN mod(g / 7, {TYPES}) < 5 THEN '' ELSE '_' || mod(g / 7, {TYPES}) / 5 END,
    jsonb_build_object('n', g, 'to', 'user' || g || '@example.com'),
    s.status, (ARRAY[-10, 0, 0, 0, 10])[1 + mod(g, 5)],
    (ARRAY{list(QUEUES)})[1 + mod(mod(g / 7, {TYPES}), {len(QUEUES)})],
    CASE WHEN mod(g, 100) BETWEEN 94 AND 97 THEN now() + mod(g, 1440) * interval '1 minute'
        ELSE t.created + interval '1 second' END,
    1, 3,
    CASE WHEN s.status = 'completed' THEN '{{"ok": true}}'::jsonb END,
    CASE WHEN s.status IN ('dead', 'failed') THEN jsonb_build_object(
        'type', 'SMTPError', 'message', 'mailbox unavailable for user' || g,
        'traceback', 'Traceback (most recent call last):\n  File "jobs.py"\nSMTPError: 550',
        'details', '{{}}'::jsonb) END,
    t.created, t.created + interval '2 seconds',
    CASE WHEN s.status <> 'pending' THEN t.created + interval '1 second' END,
    CASE WHEN s.status IN ('completed', 'dead', 'canceled') THEN t.created
        + interval '2 seconds' END,
    CASE WHEN s.status = 'pending' THEN '' ELSE 'bench-worker-' || mod(g, 8) END,
    CASE WHEN s.status = 'processing' THEN gen_random_uuid() END,
    CASE WHEN s.status = 'processing' THEN now() + interval '5 minutes' END,
    false, '', false, 0,
    CASE WHEN s.status IN ('completed', 'canceled') THEN
            least(%(last_day)s, %(today)s + 1 + mod(g / 1000, 7)::int)
        WHEN s.status = 'dead' THEN least(%(last_day)s, %(today)s + 1 + mod(g / 1000, 30)::int)
        ELSE DATE '1000-01-01' END
FROM generate_series(%(start)s, %(stop)s) AS g,
    LATERAL (SELECT {STATUS_SQL} AS status) AS s,
    LATERAL (SELECT now() - (%(stop)s - g) * interval '2 seconds' AS created) AS t
"""
ATTEMPTS_SQL = """
INSERT INTO django_jobs_jobattempt (job_id, number, worker_id, started_at, finished_at, outcome,
    error, cpu_time, peak_memory, shelf)
SELECT id, 1, 'bench-worker', started_at, started_at + interval '1 second',
    CASE status WHEN 'dead' THEN 'dead' ELSE 'failed' END, error, 0.01, 52428800, shelf
FROM django_jobs_job WHERE status IN ('dead', 'failed') AND id > %(after)s
"""
# What the engine would have counted as it finished the jobs of the last day (``JobStat``):
# hour rows for the last 25 hours and minute rows for the last 61 minutes, from the jobs
# themselves, through the created index. The overview's charts read these.
STATS_SQL = """
INSERT INTO django_jobs_jobstat (span, bucket, worker_id, queue, type, outcome, count,
    wait_sum_us, run_sum_us, wait_le_0, wait_le_1, wait_le_2, wait_le_3, wait_le_4, wait_le_5,
    wait_le_6, wait_le_7, wait_le_8, wait_le_9, wait_le_10, wait_le_11)
SELECT %(span)s, date_trunc(%(unit)s, finished_at), worker_id, queue, type, status, count(*),
    0, count(*) * 1000000, count(*), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
FROM django_jobs_job
WHERE created_at >= now() - %(back)s * interval '1 minute'
    AND status IN ('completed', 'dead', 'canceled')
GROUP BY 2, 3, 4, 5, 6
"""


def fill(start: int, stop: int) -> None:
    """Jobs ``start`` to ``stop`` and their attempts. A finished job is on a shelf as the
    engine's finish puts it (``core/shelves.py``): on PostgreSQL, where the table is partitioned
    by shelf, in a day partition, spread over the days its status's default ``RETENTION`` keeps
    (7 for completed and canceled, 30 for dead) as after weeks of finishes; open jobs are in the
    open partition."""
    from django.db import connection

    from django_jobs.core import clock
    from django_jobs.engine.postgres import partitions

    if connection.vendor == "mysql":
        return admin_mariadb.fill(start, stop)
    today = clock.now(connection.alias).astimezone(UTC).date()
    last_day = partitions.read_last_day(connection.alias) or today + timedelta(days=40)
    with connection.cursor() as cursor:
        last = cursor.execute("SELECT coalesce(max(id), 0) FROM django_jobs_job").fetchone()[0]
        cursor.execute(FILL_SQL, {"start": start, "stop": stop, "today": today,
                                  "last_day": last_day})
        cursor.execute(ATTEMPTS_SQL, {"after": last})
        cursor.execute("DELETE FROM django_jobs_jobstat")
        cursor.execute(STATS_SQL, {"span": 60, "unit": "hour", "back": 25 * 60})
        cursor.execute(STATS_SQL, {"span": 1, "unit": "minute", "back": 61})
    # What autovacuum would have done on a table this size: statistics and the visibility map.
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE django_jobs_job")
        cursor.execute("VACUUM ANALYZE django_jobs_jobattempt")


class QueryLog:
    """Counts and times every statement the page sends (the test client resets Django's log)."""

    def __init__(self) -> None:
        self.queries: list[tuple[float, str]] = []

    def __call__(self, execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            self.queries.append((time.perf_counter() - t0, sql))


def measure(get, repeat: int) -> tuple[int, float, list[tuple[float, str]]]:
    """(queries, median seconds, the queries) of ``get()``, after one warm-up call."""
    from django.db import connection

    get()
    log = QueryLog()
    with connection.execute_wrapper(log):
        get()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        get()
        times.append(time.perf_counter() - t0)
    return len(log.queries), statistics.median(times), log.queries


def pages(job_id: int, deep: dict[str, str] | None = None) -> dict[str, str]:
    jobs = "/admin/django_jobs/job/"
    return {
        "list": jobs,
        # Pages past the first: the paginator's links, and numbers typed into the URL.
        "list ?p=2000": jobs + "?p=2000",
        "list ?p=20000": jobs + "?p=20000",
        "list ?status=completed&p=50": jobs + "?status__exact=completed&p=50",
        **(deep or {}),
        "list ?status=dead": jobs + "?status__exact=dead",
        "list ?status=completed": jobs + "?status__exact=completed",
        "list ?type=webhook": jobs + "?type=webhook",
        # A type with no job in the table: a page that walks the created index reads it all.
        "list ?type=nightly_report (none)": jobs + "?type=nightly_report",
        "list ?queue=mail&has_error=yes": jobs + "?queue=mail&has_error=yes",
        "list ?created_at=past 7 days": jobs + "?created_at__gte=" + _week_ago(),
        "list search error message": jobs + "?q=user42",
        # A word no job holds: the search reads every row it may read before the page is empty.
        "list search rare word": jobs + "?q=nowhere-at-all",
        "list search public id": jobs + f"?q=j-{job_id:020x}",
        "job page": jobs + f"{job_id}/change/",
        "overview": jobs + "overview/",
    }


def _week_ago() -> str:
    from datetime import timedelta
    from urllib.parse import quote

    from django.utils import timezone

    return quote((timezone.now() - timedelta(days=7)).isoformat())


def recreate(reuse: bool = False) -> int:
    """Drop and re-create the scratch database ``DB_NAME`` and migrate it; the jobs it holds.

    With ``reuse``, a database that already holds jobs is kept as it is (migrated), so that
    one long fill serves several runs: ``--fill-only`` once, then ``--reuse``.
    """
    from django.core.management import call_command
    from django.db import connection

    if reuse:
        held = filled_rows()
        if held:
            call_command("migrate", verbosity=0)
            return held
    if connection.vendor == "mysql":
        admin_mariadb.recreate_database(DB_NAME)
    else:
        recreate_database(DB_NAME)
    call_command("migrate", verbosity=0)
    return 0


def filled_rows() -> int:
    """The jobs the scratch database holds (the fill numbers them 1..N); 0 if none or none yet."""
    from django.db import DatabaseError, connection

    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT max(id) FROM django_jobs_job")
            return int(cursor.fetchone()[0] or 0)
    except DatabaseError:
        connection.close()
        return 0


def grow(filled: int, rows: int) -> int:
    """Fill the jobs ``filled + 1`` to ``rows`` (none if the table holds them already)."""
    if rows > filled:
        t0 = time.perf_counter()
        fill(filled + 1, rows)
        print(f"filled {rows:,} rows in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return max(rows, filled)


def load() -> str:
    """The machine's load average (1, 5, 15 minutes), for the figures' record."""
    return " ".join(f"{n:.2f}" for n in os.getloadavg())


def raw_page() -> None:
    """The bare SQL of one list page: the database's floor for any list."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT * FROM django_jobs_job ORDER BY created_at DESC, id DESC LIMIT 50")
        cursor.fetchall()


def run(rows_list: list[int], repeat: int, reuse: bool = False,
        naive: bool = True) -> list[dict]:
    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.test import Client
    from django.test.utils import override_settings

    filled = recreate(reuse)
    user = User.objects.filter(username="bench").first() or User.objects.create_superuser(
        "bench", "bench@example.com", "pw")
    for name in ("ops", "support", "billing"):
        Group.objects.get_or_create(name=name)
    client = Client()
    client.force_login(user)
    results: list[dict] = []
    with override_settings(ROOT_URLCONF="benchmarks.admin_urls", DEBUG=False):
        for rows in rows_list:
            filled = grow(filled, rows)
            rows = filled
            _, raw, _ = measure(raw_page, repeat)
            group_q, group, _ = measure(lambda: client.get("/admin/auth/group/"), repeat)
            results.append({"rows": rows, "page": "baseline: raw page SELECT", "queries": 1,
                            "seconds": raw})
            results.append({"rows": rows, "page": "baseline: auth.Group changelist",
                            "queries": group_q, "seconds": group, "load": load()})
            with connection.cursor() as cursor:
                cursor.execute("SELECT id FROM django_jobs_job WHERE status = 'dead' "
                               "ORDER BY id DESC LIMIT 1")
                job_id = cursor.fetchone()[0]
            urls = pages(job_id, deep_pages(client))
            past_the_end = [name for name, url in urls.items()
                            if "p=" in url and client.get(url).status_code == 302]
            for name in past_the_end:  # a page number this table is too small to have
                print(f"{rows:,} rows: {name!r} is past the list's last page; not measured")
                del urls[name]
            for name, url in urls.items():
                for site in ("admin", "naive"):
                    if site == "naive" and (not naive or name in ("job page", "overview")):
                        continue
                    target = url if site == "admin" else url.replace("/admin/", "/naive/")
                    response = client.get(target)
                    if response.status_code == 302 and "p=" in target:
                        print(f"{rows:,} rows: {target} is past that site's last page")
                        continue
                    assert response.status_code == 200, (target, response.status_code)
                    queries, seconds, log = measure(lambda t=target: client.get(t), repeat)
                    results.append({
                        "rows": rows, "page": name if site == "admin" else f"naive {name}",
                        "queries": queries, "seconds": seconds,
                        "x_raw": seconds / raw, "x_group": seconds / group,
                        "slowest": [(round(t * 1000, 1), sql[:300]) for t, sql in
                                    sorted(log, reverse=True)[:3]],
                    })
            results += new_connections(client, urls, rows, repeat)
    return results


# Pages measured again on a new database connection each, as a site with Django's default
# CONN_MAX_AGE = 0 serves every request: the server then reads the catalog of each table and
# partition a statement plans over anew (on the partitioned tables, every day partition).
NEW_CONNECTION_PAGES = ("list", "list ?p=2000", "list last page",
                        "list ?status=completed&p=50", "job page", "overview")


def deep_pages(client: Any) -> dict[str, str]:
    """The list's last page as its paginator links it, and the page its "older jobs" link
    leads to from there, if it has one."""
    jobs = "/admin/django_jobs/job/"
    last = client.get(jobs).context["cl"].paginator.num_pages
    found = {"list last page": jobs + f"?p={last}"}
    older = getattr(client.get(jobs + f"?p={last}").context["cl"], "older_query", None)
    if older:
        found["list older than the last page"] = jobs + older
    return found


def new_connections(client: Any, urls: dict[str, str], rows: int, repeat: int) -> list[dict]:
    """The Group changelist and ``NEW_CONNECTION_PAGES``, each request on a new connection."""
    from django.db import connection

    def fresh(url: str) -> Callable[[], object]:
        def get() -> object:
            connection.close()
            return client.get(url)
        return get

    queries, group, _ = measure(fresh("/admin/auth/group/"), repeat)
    results = [{"rows": rows, "page": "baseline: auth.Group changelist, new connection",
                "queries": queries, "seconds": group}]
    for name in NEW_CONNECTION_PAGES:
        if name not in urls:  # past the last page of a small table
            continue
        queries, seconds, _ = measure(fresh(urls[name]), repeat)
        results.append({"rows": rows, "page": f"{name}, new connection", "queries": queries,
                        "seconds": seconds, "x_group": seconds / group})
    return results


def table(results: list[dict]) -> str:
    lines = ["| rows | page | queries | ms per page | x raw SELECT | x Group list |",
             "| ---: | --- | ---: | ---: | ---: | ---: |"]
    for r in results:
        ratio = (f"{r['x_raw']:.1f} | {r['x_group']:.1f}" if "x_raw" in r
                 else f"- | {r['x_group']:.1f}" if "x_group" in r else "- | -")
        lines.append(f"| {r['rows']:,} | {r['page']} | {r['queries']} | "
                     f"{r['seconds'] * 1000:.1f} | {ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="10000,1000000",
                        help="comma-separated table sizes, ascending")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--reuse", action="store_true",
                        help="keep the scratch database's jobs if it has some (see --fill-only)")
    parser.add_argument("--no-naive", action="store_true",
                        help="skip the plain ModelAdmin's pages (seconds each at 10M rows)")
    parser.add_argument("--fill-only", action="store_true",
                        help="fill the scratch database to the largest --rows and stop")
    args = parser.parse_args()
    django.setup()
    rows_list = [int(n) for n in args.rows.split(",")]
    if args.fill_only:
        grow(recreate(args.reuse), rows_list[-1])
        return
    from django.test.utils import setup_test_environment

    setup_test_environment()  # the test client's host, in-memory email; nothing else
    results = run(rows_list, args.repeat, args.reuse, naive=not args.no_naive)
    print(table(results))
    print(f"load average at the end: {load()}")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    vendor = os.environ["DJANGO_JOBS_TEST_DB"]
    (out / f"admin_pages_{vendor}.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
