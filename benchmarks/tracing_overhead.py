"""What OpenTelemetry tracing costs the worker and the enqueue, as ratios, in one run.

    python benchmarks/tracing_overhead.py [--jobs 3000] [--repeat 3]

The drain of no-op jobs by one real ``runworker --burst`` process (benchmarks/drain.py), with
the worker meeting OpenTelemetry in each way of ``benchmarks/tracing_setup.py``: ``blocked``
(not installed: the baseline), ``installed``, ``imported`` (the API imported, no tracer
provider), ``sdk`` (a tracer provider whose spans are dropped), and ``sdk+context`` (the same,
the jobs enqueued inside a span, so each attempt is its enqueue's child). The modes' order
turns from repeat to repeat. Then, in this process, ``Job.enqueue`` one by one without and
with an active span (a producer span per job), in alternating chunks, and ``run_job`` of no-op
jobs without and with a stored context (no database), first with no tracer provider and then
with the SDK's; ``run_job`` before OpenTelemetry is imported is the baseline. Prints each
median rate and its ratio to the baseline, the cost per job in microseconds, and writes the
figures as JSON to benchmarks/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_django_jobs_tracing")

from benchmarks.drain import drain  # noqa: E402
from benchmarks.throughput import create_database, drop_database, dsn, reset, setup_django  # noqa: E402

MODES = ["blocked", "installed", "imported", "sdk", "sdk+context"]
CHUNK = 200
# A caller's span context, active while the ``sdk+context`` jobs are enqueued
CONTEXT = '{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}'


def drains(args: argparse.Namespace, control: psycopg.Connection, raw: psycopg.Connection
           ) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each mode's drain rates, and the worker's CPU microseconds per job: user and system
    time of the reaped worker (``RUSAGE_CHILDREN``) less what it spent starting, which a
    machine shared with other work disturbs far less than the rate."""
    from django_jobs.core import tracing

    rates: dict[str, list[float]] = {mode: [] for mode in MODES}
    cpu: dict[str, list[float]] = {mode: [] for mode in MODES}
    for repeat in range(args.repeat):
        turn = repeat % len(MODES)
        for mode in MODES[turn:] + MODES[:turn]:
            reset(control)
            env = {"BENCH_OTEL": mode.split("+")[0]}
            before = children_cpu()
            with tracing.attached(CONTEXT if mode.endswith("+context") else None):
                result = drain("ours", 1, args, control, raw, env=env)
            spent = children_cpu() - before - result["startup_cpu_seconds"]
            rates[mode].append(result["rate"])
            cpu[mode].append(spent / args.jobs * 1e6)
            print(f"  {mode:12} {result['rate']:8.0f} jobs/s {cpu[mode][-1]:6.0f} µs CPU/job",
                  flush=True)
    return rates, cpu


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def enqueues(count: int, control: psycopg.Connection) -> dict[str, float]:
    """Enqueue one by one without and with an active span, in alternating chunks, each chunk
    one transaction (so that the commit's latency, which swings, is not what is measured)."""
    from django.db import transaction

    from django_jobs.core import tracing
    from django_jobs.models import Job

    spent = {"no span": 0.0, "span": 0.0}
    for start in range(0, count, CHUNK):
        for name in (("no span", "span") if start % (2 * CHUNK) == 0 else ("span", "no span")):
            with tracing.attached(CONTEXT if name == "span" else None):
                began = time.perf_counter()
                with transaction.atomic():
                    for n in range(start, min(start + CHUNK, count)):
                        Job.enqueue("bench.noop", {"n": n})
                spent[name] += time.perf_counter() - began
    reset(control)
    return {name: count / seconds for name, seconds in spent.items()}


def attempts(count: int) -> dict[str, float]:
    """``run_job`` of a no-op job in this thread, no database (what a slot does per job, the
    write aside), for jobs without and with a stored context, in alternating rounds: the
    microseconds each takes."""
    from django_jobs.models import Job
    from django_jobs.worker.execution import run_job

    def job(stored: str | None) -> Job:
        return Job(type="bench.noop", payload={}, queue="default", attempt=1,
                   trace_context=stored)

    jobs = {"no context": [job(None) for _ in range(count)],
            "context": [job(CONTEXT) for _ in range(count)]}
    for batch in jobs.values():  # a first round, not counted, warms the caches
        for one in batch[:500]:
            run_job(one, tidy=False)
    spent = {name: 0.0 for name in jobs}
    for _ in range(5):
        for name, batch in jobs.items():
            began = time.perf_counter()
            for one in batch:
                run_job(one, tidy=False)
            spent[name] += time.perf_counter() - began
    return {name: seconds / (5 * count) * 1e6 for name, seconds in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--enqueue-jobs", type=int, default=2000)
    parser.add_argument("--attempts", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()
    args.k = 10
    create_database()
    try:
        setup_django()
        with psycopg.connect(dsn(os.environ["BENCH_DB_NAME"]), autocommit=True) as control, \
                psycopg.connect(dsn(os.environ["BENCH_DB_NAME"]), autocommit=True) as raw:
            run = {"not imported": attempts(args.attempts)["no context"]}
            print(f"drain of {args.jobs} no-op jobs, 1 worker, x{args.repeat}:")
            rates, cpu = drains(args, control, raw)
            import opentelemetry.trace  # noqa: F401  (loaded: the API with no provider)

            enqueue_api = enqueues(args.enqueue_jobs, control)
            for name, us in attempts(args.attempts).items():
                run[f"imported, {name}"] = us
            from benchmarks.tracing_setup import configure

            configure("sdk")
            enqueue_sdk = enqueues(args.enqueue_jobs, control)
            for name, us in attempts(args.attempts).items():
                run[f"sdk, {name}"] = us
    finally:
        if not args.keep_db:
            drop_database()
    report(args, rates, cpu, enqueue_api, enqueue_sdk, run)


def report(args: argparse.Namespace, rates: dict[str, list[float]], cpu: dict[str, list[float]],
           enqueue_api: dict[str, float], enqueue_sdk: dict[str, float],
           run: dict[str, float]) -> None:
    base = statistics.median(rates["blocked"])
    base_cpu = statistics.median(cpu["blocked"])
    lines = ["", "| worker (drain) | jobs/s (median) | min-max | ratio to blocked "
             "| CPU µs/job (median) | ratio to blocked |", "| --- | --- | --- | --- | --- | --- |"]
    for mode in MODES:
        rate, used = statistics.median(rates[mode]), statistics.median(cpu[mode])
        lines.append(f"| {mode} | {rate:.0f} | {min(rates[mode]):.0f}-{max(rates[mode]):.0f} | "
                     f"{rate / base:.3f} | {used:.0f} | {used / base_cpu:.3f} |")
    lines += ["", "| enqueue one by one | no span (jobs/s) | span (jobs/s) | ratio | µs per job |",
              "| --- | --- | --- | --- | --- |"]
    for name, measured in (("no tracer provider", enqueue_api), ("SDK", enqueue_sdk)):
        plain, traced = measured["no span"], measured["span"]
        lines.append(f"| {name} | {plain:.0f} | {traced:.0f} | {traced / plain:.3f} | "
                     f"{(1 / traced - 1 / plain) * 1e6:+.0f} |")
    lines += ["", "| one attempt (run_job, in process) | µs | ratio to not imported |",
              "| --- | --- | --- |"]
    for name, us in run.items():
        lines.append(f"| {name} | {us:.1f} | {us / run['not imported']:.2f} |")
    print("\n".join(lines))
    out = ROOT / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    path = out / f"tracing-{datetime.now(UTC):%Y%m%dT%H%M%S}.json"
    path.write_text(json.dumps({"args": vars(args), "drain_rates": rates, "drain_cpu_us": cpu,
                                "enqueue_no_provider": enqueue_api, "enqueue_sdk": enqueue_sdk,
                                "attempt_us": run},
                               indent=2))
    print(f"\nwritten to {path}")


if __name__ == "__main__":
    main()
