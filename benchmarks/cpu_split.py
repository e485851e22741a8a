"""Where a drain's CPU goes: the worker processes, and the rest of the machine (PostgreSQL).

    python benchmarks/cpu_split.py [--jobs 20000] [--workers 4] [--repeat 2] [--options "..."]

The same drain as ``throughput.py`` (real ``runworker --burst`` processes against
``benchmarks/rawloop.py`` workers, released together from a table lock), with more jobs so that
start-up weighs little. While it runs, the CPU time of each worker process is read from
/proc/PID/stat and the busy time of the whole machine from /proc/stat; everything busy that is
not a worker is PostgreSQL (and this script's own sampling, a few percent). Prints CPU per job
for each, ours and raw, the ratios, and how many jobs each of our claims took. On a machine
shared with other work the rest is not all PostgreSQL: run it on a quiet one.

Our workers run with the throughput harness's options (``--concurrency 10 --prefetch 0 -v 0``:
a claim takes only the slots the last outcomes freed, a few jobs a transaction, as the raw
loop's k=10) unless ``--options`` gives others; ``--options ""`` is ``runworker`` as shipped,
whose claims take up to 100 quick jobs, so that the statements' cost is shared by more jobs.
"""

from __future__ import annotations

import argparse
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.drain import TABLES, command, fill, wait_until_blocked  # noqa: E402
from benchmarks.throughput import (  # noqa: E402
    DB_NAME,
    create_database,
    drop_database,
    dsn,
    reset,
    setup_django,
)

HZ = os.sysconf("SC_CLK_TCK")


def machine_busy() -> float:
    """Seconds of CPU the whole machine spent busy (not idle, not waiting on I/O)."""
    with open("/proc/stat") as stat:
        ticks = [int(n) for n in stat.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / HZ


def process_cpu(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / HZ


def one_drain(side: str, args: argparse.Namespace, control: psycopg.Connection,
              raw: psycopg.Connection) -> dict[str, float]:
    reset(control)
    table = TABLES[side]
    fill(side, args.jobs, raw)
    control.execute(f"ANALYZE {table}")
    logs = [tempfile.TemporaryFile() for _ in range(args.workers)]
    with control.transaction():
        control.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
        options = args.worker_options if side == "ours" else None  # the raw loop's are its own
        procs = [subprocess.Popen(command(side, i, args, raw.info.dsn, options), cwd=ROOT,
                                  stdout=log, stderr=subprocess.STDOUT)
                 for i, log in enumerate(logs)]
        wait_until_blocked(control, table, procs, logs)
        start = [process_cpu(p.pid) or 0.0 for p in procs]
        busy0, began = machine_busy(), time.perf_counter()
    last = list(start)
    busy1, ended = busy0, began
    while any(p.poll() is None for p in procs):
        for i, proc in enumerate(procs):
            cpu = process_cpu(proc.pid)
            if cpu is not None and proc.poll() is None:
                last[i] = cpu
        busy1, ended = machine_busy(), time.perf_counter()
        time.sleep(0.005)
    if any(p.returncode for p in procs):
        raise RuntimeError(f"a {side} worker failed")
    workers = sum(b - a for a, b in zip(start, last, strict=True))
    total = busy1 - busy0
    # A claim sets started_at to its transaction's now(), the same for every job it takes.
    claims = control.execute(
        f"SELECT count(DISTINCT (worker_id, started_at)) FROM {table}").fetchone()[0]
    return {"rate": args.jobs / (ended - began), "workers_us": 1e6 * workers / args.jobs,
            "rest_us": 1e6 * (total - workers) / args.jobs, "total_us": 1e6 * total / args.jobs,
            "per_claim": args.jobs / max(claims, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--options", default=None,
                        help="our runworker's options (default: --concurrency N --prefetch 0 "
                             "-v 0; \"\" for runworker as shipped)")
    args = parser.parse_args()
    args.worker_options = None if args.options is None else shlex.split(args.options)
    create_database()
    try:
        setup_django()
        with psycopg.connect(dsn(DB_NAME), autocommit=True) as control, \
                psycopg.connect(dsn(DB_NAME), autocommit=True) as raw:
            runs = {"ours": [], "raw": []}
            for index in range(args.repeat):
                for side in ("ours", "raw") if index % 2 == 0 else ("raw", "ours"):
                    runs[side].append(one_drain(side, args, control, raw))
        ours_options = (f"--concurrency {args.concurrency} --prefetch 0 -v 0"
                        if args.options is None else args.options or "(none: as shipped)")
        with open("/proc/loadavg") as load:
            print(f"{args.jobs} jobs, {args.workers} workers, ours {ours_options} / "
                  f"raw k={args.k}, median of {args.repeat}; CPU microseconds per job; "
                  f"load {load.read().split()[0]}")
        print(f"{'':6} {'jobs/s':>8} {'workers':>8} {'rest (PostgreSQL)':>18} {'total':>7} "
              f"{'per claim':>9}")
        medians = {}
        for side, results in runs.items():
            medians[side] = {key: statistics.median(r[key] for r in results)
                             for key in results[0]}
            m = medians[side]
            print(f"{side:6} {m['rate']:8.0f} {m['workers_us']:8.1f} {m['rest_us']:18.1f} "
                  f"{m['total_us']:7.1f} {m['per_claim']:9.1f}")
        ours, theirs = medians["ours"], medians["raw"]
        print(f"{'ratio':6} {ours['rate'] / theirs['rate']:8.2f} "
              f"{ours['workers_us'] / theirs['workers_us']:8.2f} "
              f"{ours['rest_us'] / theirs['rest_us']:18.2f} "
              f"{ours['total_us'] / theirs['total_us']:7.2f}")
    finally:
        from django.db import connections

        connections.close_all()
        drop_database()


if __name__ == "__main__":
    main()
