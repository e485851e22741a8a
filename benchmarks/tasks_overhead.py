"""What running work as a django.tasks Task costs over a plain job, on PostgreSQL.

    .venv/bin/python benchmarks/tasks_overhead.py [--jobs 1000] [--concurrency 4] [--rounds 3]

In one run on one database, for each round: enqueue ``--jobs`` plain jobs one by one (the
baseline) and drain them with a real Worker in burst mode, then the same with tasks through
``Task.enqueue``. Prints each round and the median task/plain ratios (alternating rounds keep a
busy machine's noise out of the ratio). A task adds argument normalisation and a TaskResult at
enqueue, and at run time one query for its attempts (the running TaskResult) plus, once final,
the reads behind task_finished.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from importlib.util import find_spec
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB = "bench_tasks_overhead"

from benchmarks.scratch import configure as configure_scratch  # noqa: E402
from benchmarks.scratch import recreate_database  # noqa: E402


def configure() -> None:
    apps = ["benchmarks.tasks_app"]
    if not find_spec("django.tasks"):
        apps.append("django_tasks")
    configure_scratch(
        DB, apps, TASKS={"default": {"BACKEND": "django_jobs.backends.DatabaseBackend"}},
        DJANGO_JOBS={"POLL_INTERVAL": 0.05},
    )


def timed(func, count: int) -> float:
    start = time.perf_counter()
    for i in range(count):
        func(i)
    return (time.perf_counter() - start) / count


def drain(concurrency: int) -> float:
    from django_jobs.worker.loop import Worker
    from django_jobs.worker.options import WorkerOptions

    worker = Worker(WorkerOptions(burst=True, concurrency=concurrency, poll_interval=0.05))
    start = time.perf_counter()
    processed = worker.run()
    return processed / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    recreate_database(DB)
    configure()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from benchmarks.tasks_app.tasks import task_noop
    from django_jobs.models import Job

    enqueue_ratios, drain_ratios = [], []
    for round_ in range(1, args.rounds + 1):
        plain_enqueue = timed(lambda i: Job.enqueue("bench.plain_noop", {"n": i}), args.jobs)
        plain_rate = drain(args.concurrency)
        task_enqueue = timed(lambda i: task_noop.enqueue(i), args.jobs)
        task_rate = drain(args.concurrency)
        enqueue_ratios.append(task_enqueue / plain_enqueue)
        drain_ratios.append(task_rate / plain_rate)
        print(f"round {round_}: enqueue {plain_enqueue * 1e6:7.0f} us plain, "
              f"{task_enqueue * 1e6:7.0f} us task; drain {plain_rate:5.0f}/s plain, "
              f"{task_rate:5.0f}/s task")
    print(f"median enqueue time, task/plain: {statistics.median(enqueue_ratios):.2f}")
    print(f"median drain rate, task/plain:   {statistics.median(drain_ratios):.2f}")

if __name__ == "__main__":
    main()
