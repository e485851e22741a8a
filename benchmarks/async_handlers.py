"""Async handlers: one event loop per slot thread against one loop per job, on PostgreSQL.

    .venv/bin/python benchmarks/async_handlers.py [--jobs 3000] [--concurrency 1] [--rounds 5]

In one run on one database, each round enqueues ``--jobs`` jobs of a trivial ``async def``
handler (``bench.async_noop``) in bulk and drains them with a real in-process Worker in burst
mode, once with the loop kept per slot thread (``worker/slot_loop.py``) and once with a loop
made and closed for each job (``slot_loop.ENABLED = False``: ``async_jobs.run_in_new_loop``),
the order alternating from round to round. Prints each round's rates (jobs/s, and jobs per CPU
second of the process) and the medians of the per-round ratios slot/job (above 1.0: the kept
loop drains faster).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB = "bench_async_handlers"

from benchmarks.scratch import configure, recreate_database  # noqa: E402


def drain(jobs: int, concurrency: int, per_slot: bool) -> tuple[float, float]:
    """Drain ``jobs`` jobs: (jobs per second of wall time, jobs per CPU second of this
    process). The second swings less on a shared machine: other processes' load does not
    count in it."""
    from django_jobs.models import Job
    from django_jobs.worker import slot_loop
    from django_jobs.worker.loop import Worker
    from django_jobs.worker.options import WorkerOptions

    Job.objects.all().delete()
    Job.enqueue_many("bench.async_noop", [{"n": n} for n in range(jobs)])
    slot_loop.ENABLED = per_slot
    worker = Worker(WorkerOptions(burst=True, concurrency=concurrency, poll_interval=0.05))
    start, cpu_start = time.perf_counter(), time.process_time()
    processed = worker.run()
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    assert processed == jobs, (processed, jobs)
    assert Job.objects.filter(status="completed").count() == jobs
    return processed / elapsed, processed / cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    recreate_database(DB)
    configure(DB, ["benchmarks.noop_app"], DJANGO_JOBS={"POLL_INTERVAL": 0.05})
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    drain(200, args.concurrency, True)  # warm up: imports, connections, prepared statements
    drain(200, args.concurrency, False)
    ratios, cpu_ratios = [], []
    for round_ in range(1, args.rounds + 1):
        rates = {}
        for per_slot in ((True, False) if round_ % 2 else (False, True)):
            rates[per_slot] = drain(args.jobs, args.concurrency, per_slot)
        ratios.append(rates[True][0] / rates[False][0])
        cpu_ratios.append(rates[True][1] / rates[False][1])
        print(f"round {round_}: loop per slot {rates[True][0]:6.0f} jobs/s "
              f"({rates[True][1]:6.0f} per CPU s), loop per job {rates[False][0]:6.0f} jobs/s "
              f"({rates[False][1]:6.0f} per CPU s), ratio {ratios[-1]:.2f} "
              f"({cpu_ratios[-1]:.2f} per CPU s)")
    print(f"median ratio, loop per slot / loop per job: {statistics.median(ratios):.2f} "
          f"jobs/s, {statistics.median(cpu_ratios):.2f} jobs per CPU second "
          f"({args.jobs} jobs, concurrency {args.concurrency}, {args.rounds} rounds)")


if __name__ == "__main__":
    main()
