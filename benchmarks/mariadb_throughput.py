"""Throughput of django-jobs on MariaDB against a minimal mysqlclient loop, same server, same run.

    python benchmarks/mariadb_throughput.py [--jobs 2000] [--repeat 3] [--quick]

Measures enqueue one by one, bulk enqueue, and the drain of no-op jobs by 1 and by 4 worker
processes (real ``runworker --burst`` processes against ``benchmarks/rawloop_mariadb.py``
workers). A drain's rate is its jobs over the time from the first claim to the last finish, both
read from the table, so process start-up is left out on both sides. Prints the medians over the
repeats and the ratio ours / raw (the median of the ratios measured within each repeat).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import rawloop_mariadb as rawloop  # noqa: E402

DB_NAME = os.environ.setdefault("BENCH_DB_NAME", "bench_django_jobs")
LABELS = {
    "enqueue_one": "enqueue one by one (jobs/s)",
    "enqueue_bulk": "bulk enqueue (jobs/s)",
    "drain_1": "drain, 1 worker (jobs/s)",
    "drain_4": "drain, 4 workers (jobs/s)",
}
TABLES = {"ours": "django_jobs_job", "raw": rawloop.TABLE}


def setup() -> Any:
    server = rawloop.connect("")
    server.cursor().execute(f"DROP DATABASE IF EXISTS `{DB_NAME}`")
    server.cursor().execute(f"CREATE DATABASE `{DB_NAME}` CHARACTER SET utf8mb4")
    server.close()
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings_mariadb"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    raw = rawloop.connect(DB_NAME)
    raw.cursor().execute(rawloop.CREATE_TABLE)
    return raw


def reset(raw: Any) -> None:
    with raw.cursor() as cur:
        for table in ("django_jobs_jobattempt", "django_jobs_worker", "django_jobs_job",
                      rawloop.TABLE):
            cur.execute(f"DELETE FROM {table}")


def rate(count: int, run: Any) -> float:
    start = time.perf_counter()
    run()
    return count / (time.perf_counter() - start)


def enqueue(side: str, raw: Any, count: int, bulk: bool) -> float:
    from django_jobs.models import Job

    if side == "raw":
        func = rawloop.enqueue_bulk if bulk else rawloop.enqueue_one_by_one
        return rate(count, lambda: func(raw, count))
    if bulk:
        return rate(count, lambda: Job.enqueue_many("bench.noop", [{"n": n}
                                                                   for n in range(count)]))
    return rate(count, lambda: [Job.enqueue("bench.noop", {"n": n}) for n in range(count)])


def drain(side: str, raw: Any, workers: int, args: argparse.Namespace) -> float:
    from django_jobs.models import Job

    if side == "raw":
        rawloop.enqueue_bulk(raw, args.jobs)
        command = [sys.executable, "-m", "benchmarks.rawloop_mariadb", DB_NAME, "--k",
                   str(args.k)]
    else:
        Job.enqueue_many("bench.noop", [{"n": n} for n in range(args.jobs)])
        command = [sys.executable, "-m", "django", "runworker",
                   "--settings=benchmarks.settings_mariadb", "--burst", "--concurrency",
                   str(args.concurrency), "-v", "0"]
    procs = [subprocess.Popen([*command, "--worker-id", f"{side}-{i}"], cwd=ROOT)
             for i in range(workers)]
    for proc in procs:
        if proc.wait(timeout=600) != 0:
            raise RuntimeError(f"a {side} worker exited with {proc.returncode}")
    with raw.cursor() as cur:
        cur.execute(f"SELECT SUM(status = 'completed'), COUNT(*), SUM(attempt <> 1), "
                    f"TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at)) "
                    f"FROM {TABLES[side]}")
        completed, total, reruns, micros = cur.fetchone()
    if completed != args.jobs or total != args.jobs or reruns:
        raise RuntimeError(f"{side} drain: {completed} of {total} completed, {reruns} rerun")
    return args.jobs / (micros / 1e6)


def one_repeat(args: argparse.Namespace, raw: Any, index: int) -> dict[str, dict[str, float]]:
    sides = ("ours", "raw") if index % 2 == 0 else ("raw", "ours")
    result: dict[str, dict[str, float]] = {name: {} for name in LABELS}
    for side in sides:
        reset(raw)
        result["enqueue_one"][side] = enqueue(side, raw, args.enqueue_jobs, bulk=False)
        reset(raw)
        result["enqueue_bulk"][side] = enqueue(side, raw, args.jobs, bulk=True)
        for workers in (1, 4):
            reset(raw)
            result[f"drain_{workers}"][side] = drain(side, raw, workers, args)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000, help="jobs per bulk enqueue and drain")
    parser.add_argument("--enqueue-jobs", type=int, default=500, help="jobs enqueued one by one")
    parser.add_argument("--repeat", type=int, default=3, help="repeats; medians are reported")
    parser.add_argument("--quick", action="store_true", help="500 jobs, one repeat")
    parser.add_argument("--k", type=int, default=10, help="jobs per claim of the raw workers")
    parser.add_argument("--concurrency", type=int, default=10,
                        help="runworker --concurrency of each of our workers")
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.enqueue_jobs, args.repeat = 500, 200, 1
    if min(args.jobs, args.enqueue_jobs, args.repeat, args.k, args.concurrency) < 1:
        parser.error("--jobs, --enqueue-jobs, --repeat, --k and --concurrency must be >= 1")
    raw = setup()
    try:
        with raw.cursor() as cur:
            cur.execute("SELECT VERSION()")
            version = cur.fetchone()[0]
        repeats = [one_repeat(args, raw, index) for index in range(args.repeat)]
        print(f"\nMariaDB {version}: {args.jobs} jobs (one by one: {args.enqueue_jobs}), "
              f"k={args.k}, --concurrency {args.concurrency}, median of {args.repeat}")
        print(f"{'measure':30} {'ours':>10} {'raw':>10} {'ours/raw':>9}")
        for name, label in LABELS.items():
            ours = [r[name]["ours"] for r in repeats]
            theirs = [r[name]["raw"] for r in repeats]
            ratio = statistics.median(o / t for o, t in zip(ours, theirs, strict=True))
            print(f"{label:30} {statistics.median(ours):10.1f} "
                  f"{statistics.median(theirs):10.1f} {ratio:9.2f}")
    finally:
        from django.db import connections

        connections.close_all()
        raw.cursor().execute(f"DROP DATABASE IF EXISTS `{DB_NAME}`")
        raw.close()


if __name__ == "__main__":
    main()
