"""What limits and unique keys cost, as ratios against the plain path, on PostgreSQL.

    .venv/bin/python benchmarks/sched_costs.py [--jobs 2000]

In one run on one database: the median claim-and-finish cycle (claim 10, finish 10) of jobs
without limits and no limit registered in the process (the baseline), of the same jobs once
other types have limits (should stay near 1: no extra query), and of jobs under a concurrency
limit, a per-key concurrency limit and a rate limit; then the median enqueue of one job
without and with a unique key.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB = "bench_sched_costs"

from benchmarks.scratch import claim_and_finish, configure, recreate_database  # noqa: E402


def cycle_ms(type: str, jobs: int) -> float:
    """Median ms of claim(10) + finish over ``jobs`` jobs of ``type``."""
    from django_jobs.models import Job

    Job.enqueue_many(type, [{"tenant": i % 50} for i in range(jobs)])
    times = []
    while (took := claim_and_finish()) is not None:
        times.append(sum(took))
    return statistics.median(times) * 1000


def enqueue_ms(jobs: int, unique: bool) -> float:
    from django_jobs.models import Job

    times = []
    for i in range(jobs):
        start = time.perf_counter()
        Job.enqueue("bench.free", {"i": i}, unique_key=f"k{i}" if unique else None)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    args = parser.parse_args()
    recreate_database(DB)
    configure(DB, ["benchmarks.sched_app"])
    from django.core.management import call_command

    from benchmarks.sched_app.jobs import register_limited

    call_command("migrate", verbosity=0)
    base = cycle_ms("bench.free", args.jobs)
    register_limited()
    rows = [("free, limits registered", cycle_ms("bench.free", args.jobs)),
            ("concurrency limit", cycle_ms("bench.capped", args.jobs)),
            ("per-key concurrency", cycle_ms("bench.capped_key", args.jobs)),
            ("rate limit", cycle_ms("bench.rated", args.jobs))]
    print(f"claim(10)+finish, median ms; baseline (no limits anywhere): {base:.2f}")
    print(f"{'case':<26} {'ms':>8} {'ratio':>7}")
    for name, ms in rows:
        print(f"{name:<26} {ms:>8.2f} {ms / base:>7.2f}")
    plain = enqueue_ms(args.jobs, unique=False)
    keyed = enqueue_ms(args.jobs, unique=True)
    print(f"enqueue one job, median ms: plain {plain:.3f}, unique key {keyed:.3f}, "
          f"ratio {keyed / plain:.2f}")


if __name__ == "__main__":
    main()
