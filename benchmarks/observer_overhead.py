"""What the worker's observers cost it: log lines and a ``job_finished`` receiver, handed to
the worker's own thread (``worker/handoff.py``), in one run.

    python benchmarks/observer_overhead.py [--jobs 3000] [--repeat 3]

The drain of no-op jobs by one real ``runworker --burst --concurrency 4`` process
(benchmarks/drain.py) in each mode: ``-v 0`` (no line), ``-v 1`` (the default: the summary
line), ``-v 2`` (two lines per job, to the drain's log file), ``receiver`` (``-v 0`` and a
``job_finished`` receiver that counts: ``BENCH_JOB_FINISHED``), and ``sentry`` (``-v 0`` and
sentry-sdk with django-jobs' integration, as the error trackers' how-to sets it up:
``BENCH_SENTRY``; it needs sentry-sdk installed). The modes' order turns from
repeat to repeat. Prints each mode's median rate and the worker's CPU microseconds per job
(its user and system time less its start-up, which a shared machine disturbs far less than
the rate). Run it from two checkouts to compare them.

Then, in this process, ``--records`` DEBUG records of the worker's logger written to /dev/null
through a plain formatter, alternately straight from the logging thread and handed to the
worker's thread (``handoff``): the CPU time of the thread that logs, and of the process (both
threads), per record. ``--records-only`` skips the drains.
"""

from __future__ import annotations

import argparse
import logging
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_django_jobs_observers")

from benchmarks.drain import drain  # noqa: E402
from benchmarks.throughput import create_database, drop_database, dsn, reset, setup_django  # noqa: E402

MODES = {
    "-v 0": (["-v", "0"], {}),
    "-v 1": (["-v", "1"], {}),
    "-v 2": (["-v", "2"], {}),
    "receiver": (["-v", "0"], {"BENCH_JOB_FINISHED": "1"}),
    "sentry": (["-v", "0"], {"BENCH_SENTRY": "1"}),
}


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def records(count: int, repeat: int) -> None:
    """The logging thread's and the process's CPU per record, direct and handed off."""
    from django_jobs.worker.handoff import CAPACITY, handoff

    count = min(count, CAPACITY)  # none dropped: a dropped record costs less
    logger = logging.getLogger("django_jobs.worker")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    out = logging.StreamHandler(open(os.devnull, "w"))
    out.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    logger.addHandler(out)
    spent: dict[str, list[tuple[float, float]]] = {"direct": [], "handoff": []}
    for _ in range(repeat):
        for mode in spent:
            if mode == "handoff":
                handoff.start()
            process, thread = time.process_time(), time.thread_time()
            for _ in range(count):
                logger.debug("job %s: %s %s attempt %d in %.1f ms", "completed", "j-1", "noop",
                             1, 0.1, extra={"job_id": "j-1", "event": "job_finished"})
            thread = time.thread_time() - thread
            if mode == "handoff":
                handoff.stop(timeout=600)
            spent[mode].append((thread / count * 1e6,
                                (time.process_time() - process) / count * 1e6))
    print(f"\n{count} DEBUG records, x{repeat}")
    print("| records | logging thread CPU per record (median) | process CPU per record (median) |"
          "\n| --- | --- | --- |")
    for mode, figures in spent.items():
        print(f"| {mode} | {statistics.median(f[0] for f in figures):.1f} µs | "
              f"{statistics.median(f[1] for f in figures):.1f} µs |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--records", type=int, default=8000)
    parser.add_argument("--records-only", action="store_true")
    args = parser.parse_args()
    if args.records_only:
        records(args.records, 5)
        return
    args.k, args.concurrency = 10, 4
    names = list(MODES)
    rates: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    create_database()
    try:
        setup_django()
        with psycopg.connect(dsn(os.environ["BENCH_DB_NAME"]), autocommit=True) as control, \
                psycopg.connect(dsn(os.environ["BENCH_DB_NAME"]), autocommit=True) as raw:
            for repeat in range(args.repeat):
                turn = repeat % len(names)
                for name in names[turn:] + names[:turn]:
                    options, env = MODES[name]
                    reset(control)
                    before = children_cpu()
                    result = drain("ours", 1, args, control, raw, env=env, options=[
                        "--concurrency", str(args.concurrency), "--prefetch", "0", *options])
                    spent = children_cpu() - before - result["startup_cpu_seconds"]
                    rates[name].append(result["rate"])
                    cpu[name].append(spent / args.jobs * 1e6)
                    print(f"  {name:9} {rates[name][-1]:7.0f} jobs/s "
                          f"{cpu[name][-1]:5.0f} µs CPU/job", flush=True)
    finally:
        drop_database()
    print(f"\n{ROOT}: drain of {args.jobs} no-op jobs, 1 worker, x{args.repeat}")
    print("| mode | jobs/s (median) | CPU per job (median) |\n| --- | --- | --- |")
    for name in names:
        print(f"| {name} | {statistics.median(rates[name]):.0f} | "
              f"{statistics.median(cpu[name]):.0f} µs |")
    records(args.records, 5)


if __name__ == "__main__":
    main()
