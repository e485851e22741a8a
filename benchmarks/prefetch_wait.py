"""How long claimed jobs wait for a thread: the bound of the prefetch, measured.

    python benchmarks/prefetch_wait.py [--quick]

One worker with the default options (``--concurrency 1``, ``--prefetch 0.05``), run in this
process, drains each workload in turn on a new database; for every job it records the time
from its claim (``Job.started_at`` as the claim set it) to its start (the ``job_started``
signal), and counts the jobs handed back unstarted. Workloads:

- ``noop``: no-op jobs only;
- ``5ms``: jobs that sleep 5 ms;
- ``mixed``: no-op jobs with a job that sleeps 1 s every 500 (the estimate is wrong for it).

Prints, per workload, the jobs per claim (median), the claim-to-start wait (median, 99th
percentile, maximum) and the jobs handed back.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import throughput  # noqa: E402


def workloads(jobs: int) -> dict[str, list[tuple[str, dict]]]:
    mixed = [("bench.sleep", {"seconds": 1.0}) if n % 500 == 250 else ("bench.noop", {"n": n})
             for n in range(jobs)]
    return {
        "noop": [("bench.noop", {"n": n}) for n in range(jobs)],
        "5ms": [("bench.sleep", {"seconds": 0.005}) for _ in range(min(jobs, 400))],
        "mixed": mixed,
    }


def measure(name: str, work: list[tuple[str, dict]]) -> dict:
    from django_jobs.models import Job, JobAttempt
    from django_jobs.signals import job_started
    from django_jobs.worker.loop import Worker
    from django_jobs.worker.options import WorkerOptions

    with throughput.psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as c:
        c.execute("TRUNCATE django_jobs_job, django_jobs_jobattempt, django_jobs_worker "
                  "RESTART IDENTITY CASCADE")
    for type_, payload in work:  # one by one, in this order
        Job.enqueue(type_, payload)
    waits: list[float] = []
    claims: Counter = Counter()

    def started(sender, job, attempt, **kwargs):  # type: ignore[no-untyped-def]
        waits.append((datetime.now(UTC) - job.started_at).total_seconds())
        claims[job.lease_token] += 1

    job_started.connect(started)
    try:
        Worker(WorkerOptions(burst=True, poll_interval=0.05)).run()
    finally:
        job_started.disconnect(started)
    handed_back = JobAttempt.objects.filter(outcome="released").count()
    waits.sort()
    return {
        "workload": name, "jobs": len(work), "per_claim": statistics.median(claims.values()),
        "wait_median_ms": 1000 * statistics.median(waits),
        "wait_p99_ms": 1000 * waits[int(0.99 * (len(waits) - 1))],
        "wait_max_ms": 1000 * waits[-1], "handed_back": handed_back,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--quick", action="store_true", help="1,000 jobs")
    args = parser.parse_args()
    if args.quick:
        args.jobs = 1000
    throughput.create_database()
    try:
        throughput.setup_django()
        print(f"{'workload':8} {'jobs':>6} {'per claim':>9} {'wait p50':>9} {'p99':>8} "
              f"{'max (ms)':>9} {'handed back':>12}")
        for name, work in workloads(args.jobs).items():
            row = measure(name, work)
            print(f"{name:8} {row['jobs']:6} {row['per_claim']:9.0f} "
                  f"{row['wait_median_ms']:9.2f} {row['wait_p99_ms']:8.2f} "
                  f"{row['wait_max_ms']:9.1f} {row['handed_back']:12}", flush=True)
    finally:
        from django.db import connections

        connections.close_all()
        throughput.drop_database()


if __name__ == "__main__":
    main()
