"""django-jobs side by side with its peers and a raw psycopg loop, on the same PostgreSQL, same run.

    sh benchmarks/peers/setup.sh                                   # once: the peers' venv
    benchmarks/peers/.venv/bin/python -m benchmarks.peers.run --quick
    benchmarks/peers/.venv/bin/python -m benchmarks.peers.run --jobs 5000 --repeat 3

For each system (raw, django-jobs, PGQueuer, Procrastinate, django-tasks-db, django-q2), at its
defaults and tuned as its documentation recommends: enqueue one by one, bulk enqueue, drain of
no-op jobs by 1 and by 4 workers, and wake-up latency of an idle worker. Every figure is also a
ratio to the raw loop measured in the same repeat. Writes the figures as JSON to
``benchmarks/results/``, then the tables and plots (``benchmarks/peers/report.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from benchmarks.peers import report
from benchmarks.peers.systems import (
    ROOT,
    SYSTEMS,
    db_name,
    dsn,
    env,
    prepare_variant,
    set_up,
    worker_command,
)
from benchmarks.throughput import size_options, write_json

STOP_GRACE_SECONDS = 15
BULK_TRIES = 3


def create_databases(systems: list[str]) -> None:
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        for system in systems:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name(system)}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{db_name(system)}"')
    for system in systems:
        set_up(system)


def drop_databases(systems: list[str]) -> None:
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        for system in systems:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name(system)}" WITH (FORCE)')


def reset(system: str) -> None:
    with psycopg.connect(dsn(db_name(system)), autocommit=True) as conn:
        conn.execute(SYSTEMS[system].reset_sql)
        conn.execute("CHECKPOINT")


def client(system: str, variant: str, *args: Any, probe_file: str = "") -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.peers.client", system, *map(str, args)],
        cwd=ROOT, env=env(system, variant, probe_file=probe_file), capture_output=True,
        text=True,
    )
    if out.returncode:
        raise RuntimeError(f"client {system} {args} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


class Workers:
    """The system's worker processes, each in its own process group, logging to a file."""

    def __init__(self, system: str, variant: str, count: int, probe_file: str,
                 logs: Path) -> None:
        processes = 1 if SYSTEMS[system].per_cluster else count
        self.procs = []
        self.logs = []
        for index in range(processes):
            log = open(logs / f"{system}-{variant}-{count}w-{index}.log", "ab")
            self.logs.append(log)
            self.procs.append(subprocess.Popen(
                worker_command(system, variant, index), cwd=ROOT, stdout=log, stderr=log,
                env=env(system, variant, workers=count, probe_file=probe_file),
                start_new_session=True,
            ))

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.time() + STOP_GRACE_SECONDS
        for proc in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        for log in self.logs:
            log.close()

    def check(self) -> None:
        dead = [p.args for p in self.procs if p.poll() is not None]
        if dead:
            raise RuntimeError(f"a worker exited early: {dead[0]}")


def measure_system(system: str, args: argparse.Namespace, logs: Path) -> dict[str, Any]:
    """Every workload once for one system, each variant."""
    result: dict[str, Any] = {}
    reset(system)
    result["enqueue_one"] = client(system, "default", "enqueue", args.enqueue_jobs)
    # A bulk enqueue lasts a fraction of a second: the median of BULK_TRIES steadies it.
    bulks = []
    for _ in range(BULK_TRIES):
        reset(system)
        bulks.append(client(system, "default", "bulk", args.jobs))
    result["enqueue_bulk"] = {"rate": statistics.median(b["rate"] for b in bulks),
                              "how": bulks[0]["how"], "rates": [b["rate"] for b in bulks]}
    for variant in SYSTEMS[system].variants:
        if variant not in args.variants:
            continue
        prepare_variant(system, variant)
        for count in (1, 4):
            reset(system)
            probe_dir = tempfile.mkdtemp(prefix="peers-probe-")
            probe_file = os.path.join(probe_dir, "probe")  # written by the probe job
            workers = Workers(system, variant, count, probe_file, logs)
            try:
                time.sleep(args.settle)
                workers.check()
                drained = client(system, variant, "drain", args.jobs, 10 * count)
                result[f"drain_{count}:{variant}"] = drained
                if count == 1:
                    woke = client(system, variant, "wake", args.samples, probe_file=probe_file)
                    result[f"wake:{variant}"] = woke
                workers.check()
            finally:
                workers.stop()
                shutil.rmtree(probe_dir, ignore_errors=True)
        print(f"  {system} {variant}: " + ", ".join(
            f"{k.split(':')[0]} {v['rate']:.0f}/s" for k, v in result.items()
            if k.endswith(variant) and "rate" in v), flush=True)
    return result


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    names = ["django", "procrastinate", "pgqueuer", "django-q2", "django-tasks-db",
             "django-tasks", "psycopg", "django-db-jobs"]
    found = {}
    for name in names:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "absent"
    return found


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size_options(parser)
    parser.add_argument("--samples", type=int, default=30, help="wake-up probes per variant")
    parser.add_argument("--settle", type=float, default=4.0,
                        help="seconds the workers get to start before a drain")
    parser.add_argument("--quick", action="store_true",
                        help="300 jobs, 1 repeat, 10 probes: a smoke run")
    parser.add_argument("--systems", default=",".join(SYSTEMS),
                        help="comma-separated subset of: " + ", ".join(SYSTEMS))
    parser.add_argument("--variants", default="default,tuned")
    parser.add_argument("--no-docs", action="store_true",
                        help="print the tables, leave docs/ untouched")
    parser.add_argument("--keep-db", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.repeat, args.samples, args.settle = 300, 1, 10, 3.0
    args.enqueue_jobs = args.enqueue_jobs or args.jobs
    args.systems = args.systems.split(",")
    args.variants = args.variants.split(",")
    unknown = set(args.systems) - set(SYSTEMS)
    if unknown or "raw" not in args.systems:
        parser.error(f"--systems: unknown {sorted(unknown)}" if unknown else
                     "--systems must include raw: every figure is a ratio to it")
    if min(args.jobs, args.repeat, args.samples) < 1:
        parser.error("--jobs, --repeat and --samples must be at least 1")
    return args


def main() -> None:
    args = parse_args()
    logs = Path(tempfile.mkdtemp(prefix="peers-logs-"))
    began = time.time()
    create_databases(args.systems)
    try:
        repeats = []
        for index in range(args.repeat):
            order = args.systems[index % len(args.systems):] + \
                args.systems[:index % len(args.systems)]
            print(f"repeat {index + 1}/{args.repeat}: {', '.join(order)}", flush=True)
            repeats.append({system: measure_system(system, args, logs) for system in order})
    finally:
        if not args.keep_db:
            drop_databases(args.systems)
    path = write_json("peers", args, versions=versions(), command=" ".join(
        ["python -m benchmarks.peers.run", *sys.argv[1:]]), repeats=repeats,
        seconds=round(time.time() - began))
    print(f"\nworker logs in {logs}\nfigures written to {path.relative_to(ROOT)}")
    report.main([str(path)] + (["--no-docs"] if args.no_docs else []))


if __name__ == "__main__":
    main()
