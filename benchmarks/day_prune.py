"""Pruning a day of history on PostgreSQL's partitioned table: the drop of the day's
partitions (``engine/postgres/day_drops.py``, as a worker's retention pass does it) against
the batched prune of as many jobs in the open partition (``prune_pass``, the one-statement
batch of ``engine/postgres/prune.py``), the baseline, in the same run and database.

    .venv/bin/python benchmarks/day_prune.py [--jobs 20000] [--batch 1000] [--no-baseline]
    .venv/bin/python benchmarks/day_prune.py --jobs 5000000 --no-baseline   # by hand

The database is migrated as a site's is (``migrate``: the tables partitioned by shelf). The
day's jobs are completed jobs with one attempt each, filled by ``generate_series`` with the
shelf of a day partition the migration made; the baseline's are the same rows on the open
shelf, finished 40 days ago (the history an upgraded site's first partition holds), pruned
with a 7-day age. Prints each prune's time, the tables' size before and after (every
partition, with indexes) and after ``VACUUM``, and the baseline / drop ratio of the times;
writes them as JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_day_prune")

from benchmarks import throughput  # noqa: E402

FILL = """
WITH jobs AS (
    INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue, run_at,
        attempt, max_attempts, result, created_at, updated_at, started_at, finished_at,
        worker_id, cancel_requested, callback_url, has_dependents, crashes, shelf)
    SELECT %(tag)s || lpad(to_hex(g), 20, '0'), 'bench.noop',
        jsonb_build_object('n', g, 'to', 'user' || g || '@example.com'), 'completed', 0,
        'default', t.at, 1, 3, '{"ok": true}', t.at, t.at, t.at, t.at, 'bench-worker', false,
        '', false, 0, %(shelf)s
    FROM generate_series(1, %(count)s::bigint) AS g,
        LATERAL (SELECT now() - interval '40 days' + g * interval '1 millisecond' AS at) AS t
    RETURNING id, started_at, finished_at, shelf)
INSERT INTO django_jobs_jobattempt (job_id, number, worker_id, started_at, finished_at, outcome,
    cpu_time, peak_memory, shelf)
SELECT id, 1, 'bench-worker', started_at, finished_at, 'completed', 0.001, 52428800, shelf
FROM jobs
"""
SIZE = """
SELECT coalesce(sum(pg_total_relation_size(relid)), 0) FROM (
    SELECT relid FROM pg_partition_tree('django_jobs_job')
    UNION ALL SELECT relid FROM pg_partition_tree('django_jobs_jobattempt')) AS tree
"""


def conn():
    import psycopg

    return psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True)


def fill(count: int, shelf, tag: str) -> float:
    start = time.perf_counter()
    with conn() as c:
        c.execute(FILL, {"count": count, "shelf": shelf, "tag": tag})
        c.execute("VACUUM ANALYZE django_jobs_job, django_jobs_jobattempt")
    return time.perf_counter() - start


def size_mb() -> float:
    with conn() as c:
        return float(c.execute(SIZE).fetchone()[0]) / 1e6


def vacuum() -> None:
    with conn() as c:
        c.execute("VACUUM django_jobs_job, django_jobs_jobattempt")


def count(shelf=None) -> int:
    with conn() as c:
        if shelf is None:
            return c.execute("SELECT count(*) FROM django_jobs_job").fetchone()[0]
        return c.execute("SELECT count(*) FROM django_jobs_job WHERE shelf = %s",
                         [shelf]).fetchone()[0]


def drop_day(jobs: int, batch: int) -> dict[str, float]:
    """The drop of one day's partitions holding ``jobs`` finished jobs."""
    from datetime import timedelta

    from django.db import connection

    from django_jobs.engine.postgres import day_drops, partitions
    from django_jobs.features.dependencies import waited_on

    assert partitions.partitioned("default"), "the jobs table is not partitioned"
    with connection.cursor() as cursor:
        day = min(partitions.attached_days(cursor, partitions.JOBS))  # the first day made
    # The days ahead of it made first, as the passes of the days before would have.
    partitions.make_ahead("default", day, [timedelta(days=7)])
    filled = fill(jobs, day, "d-")
    assert count(day) == jobs
    before = size_mb()
    start = time.perf_counter()
    done = day_drops.upkeep("default", day, [timedelta(days=7)], waited_on(), batch)
    seconds = time.perf_counter() - start
    assert done is not None and done["jobs"].get("completed") == jobs, done
    assert done["made"] == 0, done
    assert count(day) == 0
    after = size_mb()
    vacuum()
    return {"fill_s": filled, "seconds": seconds, "jobs_per_s": jobs / seconds,
            "size_before_mb": before, "size_after_mb": after, "size_after_vacuum_mb": size_mb()}


def batched(jobs: int, batch: int) -> dict[str, float]:
    """The batched prune of ``jobs`` finished jobs on the open shelf (the baseline)."""
    from datetime import timedelta

    from django_jobs.core.shelves import OPEN_SHELF
    from django_jobs.features.retention import prune_pass

    filled = fill(jobs, OPEN_SHELF, "b-")
    before = size_mb()
    start = time.perf_counter()
    counts, caught_up = prune_pass({"completed": timedelta(days=7)}, batch_size=batch)
    seconds = time.perf_counter() - start
    assert caught_up and counts["completed"] == jobs, counts
    after = size_mb()
    vacuum()
    return {"fill_s": filled, "seconds": seconds, "jobs_per_s": jobs / seconds,
            "size_before_mb": before, "size_after_mb": after, "size_after_vacuum_mb": size_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--no-baseline", action="store_true",
                        help="the day's drop alone (the baseline's batches take minutes at 1M)")
    args = parser.parse_args()
    figures: dict[str, dict[str, float]] = {}
    with throughput.bench_database():
        figures["drop of the day"] = drop_day(args.jobs, args.batch)
        if not args.no_baseline:
            figures["batched prune (baseline)"] = batched(args.jobs, args.batch)
    print(f"{args.jobs:,} completed jobs, one attempt each; sizes of jobs and attempts with "
          "their indexes, every partition")
    print(f"{'prune':<26} {'seconds':>9} {'jobs/s':>12} {'MB before':>10} {'after':>8} "
          f"{'vacuumed':>9}")
    for name, row in figures.items():
        print(f"{name:<26} {row['seconds']:>9.3f} {row['jobs_per_s']:>12,.0f} "
              f"{row['size_before_mb']:>10.1f} {row['size_after_mb']:>8.1f} "
              f"{row['size_after_vacuum_mb']:>9.1f}")
    ratio = None
    if "batched prune (baseline)" in figures:
        ratio = (figures["batched prune (baseline)"]["seconds"]
                 / figures["drop of the day"]["seconds"])
        print(f"baseline / drop, time: {ratio:.1f}")
    path = throughput.write_json("day_prune", args, figures=figures, ratio=ratio,
                                 load=os.getloadavg())
    print(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
