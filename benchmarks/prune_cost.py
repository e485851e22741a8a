"""What a prune pass costs: Django's delete of each batch against the one-statement batch of
``engine/postgres/prune.py``, on PostgreSQL.

    .venv/bin/python benchmarks/prune_cost.py [--jobs 40000] [--batch 500] [--repeat 3]

Each repeat fills a new batch of ``--jobs`` completed jobs, each with one attempt (a job's
row as a worker leaves it, a payload and a result), and prunes them all with ``prune_pass``
as a worker does, in batches of ``--batch``, twice: by Django's delete and by the statement,
in alternating order from repeat to repeat, refilling in between. Prints the jobs pruned per
second of each, the pruning process's CPU per job, and the median and range of statement /
Django (each ratio taken within one repeat); writes them as JSON to ``benchmarks/results/``.

The jobs are inserted on the open shelf (the column's default): on PostgreSQL they sit in the
open partition, which is pruned by these batched deletes; jobs that a worker finished sit in day
partitions, pruned by dropping them (``benchmarks/partitioned_history.py`` measures that).
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
os.environ.setdefault("BENCH_DB_NAME", "bench_prune_cost")

from benchmarks import throughput  # noqa: E402

FILL = """
WITH jobs AS (
    INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue, run_at,
        attempt, max_attempts, result, created_at, updated_at, started_at, finished_at,
        worker_id, cancel_requested, callback_url, has_dependents, crashes)
    SELECT 'p-' || lpad(to_hex(g), 20, '0'), 'bench.noop',
        jsonb_build_object('n', g, 'to', 'user' || g || '@example.com'), 'completed', 0,
        'default', t.at, 1, 3, '{"ok": true}', t.at, t.at, t.at, t.at, 'bench-worker', false,
        '', false, 0
    FROM generate_series(%(start)s::bigint, %(stop)s::bigint) AS g,
        LATERAL (SELECT now() - interval '40 days' + g * interval '1 millisecond' AS at) AS t
    RETURNING id, started_at, finished_at)
INSERT INTO django_jobs_jobattempt (job_id, number, worker_id, started_at, finished_at, outcome,
    cpu_time, peak_memory)
SELECT id, 1, 'bench-worker', started_at, finished_at, 'completed', 0.001, 52428800 FROM jobs
"""


def fill(start: int, count: int) -> None:
    import psycopg

    with psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as conn:
        conn.execute(FILL, {"start": start, "stop": start + count - 1})
        conn.execute("VACUUM ANALYZE django_jobs_job, django_jobs_jobattempt")


def prune_all(path: str, batch: int) -> tuple[int, float, float]:
    """Prune every completed job through ``path``; jobs, seconds and CPU seconds."""
    from datetime import timedelta

    from django_jobs.engine import engine_for
    from django_jobs.engine.postgres.engine import PostgresEngine
    from django_jobs.engine.staff import StaffVerbs
    from django_jobs.features.retention import prune_pass
    from django_jobs.models import Job

    engine = engine_for(Job.objects.db)
    assert isinstance(engine, PostgresEngine)
    chosen = StaffVerbs.delete_batch if path == "django" else PostgresEngine.delete_batch
    original = PostgresEngine.delete_batch
    PostgresEngine.delete_batch = chosen  # type: ignore[method-assign]
    try:
        wall, cpu = time.perf_counter(), time.process_time()
        counts, caught_up = prune_pass({"completed": timedelta(days=7)}, batch_size=batch)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    finally:
        PostgresEngine.delete_batch = original  # type: ignore[method-assign]
    assert caught_up
    return counts["completed"], wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=40000)
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"django": [], "statement": []}
    ratios: list[float] = []
    with throughput.bench_database():
        next_id = 1
        for index in range(args.repeat):
            rates = {}
            for path in ("django", "statement") if index % 2 == 0 else ("statement", "django"):
                fill(next_id, args.jobs)
                next_id += args.jobs
                jobs, wall, cpu = prune_all(path, args.batch)
                assert jobs == args.jobs, (path, jobs)
                rates[path] = jobs / wall
                runs[path].append({"jobs_per_s": jobs / wall, "cpu_us_per_job": cpu / jobs * 1e6})
                print(f"repeat {index + 1}: {path:<9} {jobs / wall:>8,.0f} jobs/s, "
                      f"{cpu / jobs * 1e6:6.1f} µs CPU per job")
            ratios.append(rates["statement"] / rates["django"])
    summary = {path: {key: statistics.median(run[key] for run in values) for key in values[0]}
               for path, values in runs.items()}
    for path, figures in summary.items():
        print(f"{path:<9} median {figures['jobs_per_s']:>8,.0f} jobs/s, "
              f"{figures['cpu_us_per_job']:6.1f} µs CPU per job")
    print(f"statement / django, jobs per second: median {statistics.median(ratios):.2f} "
          f"({min(ratios):.2f}-{max(ratios):.2f})")
    path = throughput.write_json("prune_cost", args, summary=summary, ratios=ratios,
                                 load=os.getloadavg())
    print(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
