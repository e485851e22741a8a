"""The admin overview against the admin's floor, and its open-job counts against one count of
all open states, measured in turns so that a loaded machine slows each alike.

    DJANGO_JOBS_TEST_DB=postgres python benchmarks/overview_counts.py [--rows 200000,1000000]

Fills a scratch database (``django_jobs_bench_overview``, ``BENCH_DB_NAME``; dropped and
re-created) as ``benchmarks/admin_pages.py`` does (90% completed, 10% open), then, in each
round, once each:

- ``Group list``: the stock admin changelist of ``auth.Group`` (3 rows), the admin's floor;
- ``overview``: the admin overview page;
- ``open counts, one query``: the open jobs grouped by queue, type and status in one query of
  all five open states, which matches no partial index's condition (the status index leaves
  processing out), so PostgreSQL reads the whole table;
- ``open counts, two queries``: the overview's own, the states of the status index through
  it and processing through the lease index.

Medians over the rounds; ratios against ``Group list`` for the pages and against the two
queries for the one query.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "django_jobs_bench_overview")

from benchmarks import admin_pages  # noqa: E402  (sets JOBS_DB_NAME and the settings module)

# The statuses of ``admin/overview_figures.py``, spelled out so that this script also measures
# a checkout whose overview counts all open states in one query, for a comparison of the two.
OPEN_STATES = ("pending", "processing", "failed", "dead", "canceled")
INDEXED_OPEN_STATES = ("pending", "failed", "dead", "canceled")


def open_counts_one_query() -> None:
    from django.db.models import Count, Min, Q
    from django.utils import timezone

    from django_jobs.models import Job

    now = timezone.now()
    list(Job.objects.filter(status__in=OPEN_STATES).values("queue", "type", "status").annotate(
        n=Count("pk"), due=Count("pk", filter=Q(run_at__lte=now)),
        oldest=Min("run_at", filter=Q(run_at__lte=now))).order_by())


def open_counts_two_queries() -> None:
    from django.db.models import Count, Min, Q
    from django.utils import timezone

    from django_jobs.models import Job

    now = timezone.now()
    list(Job.objects.filter(status__in=INDEXED_OPEN_STATES).values("queue", "type", "status")
         .annotate(n=Count("pk"), due=Count("pk", filter=Q(run_at__lte=now)),
                   oldest=Min("run_at", filter=Q(run_at__lte=now))).order_by())
    list(Job.objects.filter(status="processing").values("queue", "type")
         .annotate(n=Count("pk")).order_by())


def run(rows_list: list[int], rounds: int) -> list[str]:
    from django.contrib.auth.models import Group, User
    from django.test import Client
    from django.test.utils import override_settings

    admin_pages.recreate()
    user = User.objects.create_superuser("bench", "bench@example.com", "pw")
    for name in ("ops", "support", "billing"):
        Group.objects.create(name=name)
    client = Client()
    client.force_login(user)
    lines = ["| rows | what | ms (median) | ratio |", "| ---: | --- | ---: | --- |"]
    filled = 0
    with override_settings(ROOT_URLCONF="benchmarks.admin_urls", DEBUG=False):
        for rows in rows_list:
            admin_pages.fill(filled + 1, rows)
            filled = rows
            steps = {
                "Group list": lambda: client.get("/admin/auth/group/"),
                "overview": lambda: client.get("/admin/django_jobs/job/overview/"),
                "open counts, one query": open_counts_one_query,
                "open counts, two queries": open_counts_two_queries,
            }
            times: dict[str, list[float]] = {name: [] for name in steps}
            for name, step in steps.items():
                response = step()  # warm-up
                assert response is None or response.status_code == 200, (name, response)
            for _ in range(rounds):
                for name, step in steps.items():
                    t0 = time.perf_counter()
                    step()
                    times[name].append(time.perf_counter() - t0)
            ms = {name: statistics.median(t) * 1000 for name, t in times.items()}
            lines += [
                f"| {rows:,} | Group list | {ms['Group list']:.1f} | - |",
                f"| {rows:,} | overview | {ms['overview']:.1f} | "
                f"{ms['overview'] / ms['Group list']:.1f}x Group list |",
                f"| {rows:,} | open counts, two queries | "
                f"{ms['open counts, two queries']:.1f} | - |",
                f"| {rows:,} | open counts, one query | {ms['open counts, one query']:.1f} | "
                f"{ms['open counts, one query'] / ms['open counts, two queries']:.1f}x two |",
            ]
    return lines


def main() -> None:
    import django

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="200000,1000000",
                        help="comma-separated table sizes, filled in turn")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    django.setup()
    from django.test.utils import setup_test_environment

    setup_test_environment()  # the test client's host; nothing else
    print("\n".join(run([int(r) for r in args.rows.split(",")], args.rounds)))


if __name__ == "__main__":
    main()
