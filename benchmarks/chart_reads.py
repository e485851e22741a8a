"""What the overview's charts cost to read (``admin/charts.py``), by the rows of a day's counts.

    python benchmarks/chart_reads.py [--workers 10] [--types 20] [--queues 2] [--repeat 5]

Fills the counts' table (``JobStat``) of a new PostgreSQL database (``BENCH_DB_NAME``, default
``bench_django_jobs_charts``) as retention keeps it, with a row for every minute of the last
two hours and every hour of the last two days, for every worker, queue, type and two outcomes
(completed, failed): the most a site of that many workers, queues and types writes, each of
them busy every minute. Then times the charts' reads
(``charts.context``: the day's grouped query and the filter's choices) for all jobs, one
queue, and one type, the median of ``--repeat`` after a warm-up; and the raw grouped query as
the baseline (the day's hour rows, grouped).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_django_jobs_charts")
os.environ["BENCH_ADMIN"] = "1"  # django_jobs.admin needs Django's admin installed

from benchmarks import throughput  # noqa: E402

FILL = """INSERT INTO django_jobs_jobstat (worker_id, span, bucket, queue, type, outcome, count,
    wait_sum_us, run_sum_us, wait_le_0, wait_le_1, wait_le_2, wait_le_3, wait_le_4, wait_le_5,
    wait_le_6, wait_le_7, wait_le_8, wait_le_9, wait_le_10, wait_le_11)
SELECT 'w' || w, s.span, s.bucket, 'q' || q, 't' || t, o,
    10, 1000000, 500000, 1, 2, 3, 2, 1, 1, 0, 0, 0, 0, 0, 0
FROM (SELECT 1 AS span, date_trunc('minute', now()) - m * interval '1 minute' AS bucket
      FROM generate_series(0, 119) m
      UNION ALL
      SELECT 60, date_trunc('hour', now()) - h * interval '1 hour' FROM generate_series(0, 47) h
     ) AS s, generate_series(1, %s) w, generate_series(1, %s) q,
    generate_series(1, %s) t, unnest(ARRAY['completed', 'failed']) o"""


def timed(call, repeat: int) -> float:
    call()
    spent = []
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        spent.append(time.perf_counter() - start)
    return statistics.median(spent) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=10)
    parser.add_argument("--types", type=int, default=20)
    parser.add_argument("--queues", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with throughput.bench_database():
        from django.db import connection

        from django_jobs.admin import charts

        with connection.cursor() as cursor:
            cursor.execute(FILL, [args.workers, args.queues, args.types])
            cursor.execute("ANALYZE django_jobs_jobstat")
            cursor.execute("SELECT count(*) FROM django_jobs_jobstat")
            rows = cursor.fetchone()[0]

        def raw() -> None:
            with connection.cursor() as cursor:
                cursor.execute("SELECT bucket, outcome, sum(count) FROM django_jobs_jobstat "
                               "WHERE span = 60 AND bucket >= now() - interval '1 day' "
                               "GROUP BY 1, 2")
                cursor.fetchall()

        print(f"{rows:,} rows ({args.workers} workers, {args.queues} queues, {args.types} "
              f"types, 2 outcomes, 120 minutes and 48 hours); median of {args.repeat}, ms")
        for name, call in (
            ("raw grouped query", raw),
            ("charts, all", lambda: charts.context({})),
            ("charts, ?queue=q1", lambda: charts.context({"queue": "q1"})),
            ("charts, ?type=t1", lambda: charts.context({"type": "t1"})),
        ):
            print(f"{name:20} {timed(call, args.repeat):9.1f}")


if __name__ == "__main__":
    main()
