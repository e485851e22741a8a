"""Wake-up latency with one of N idle workers frozen (SIGSTOP) beside all healthy, and what
idle workers cost the database.

    python benchmarks/frozen_waiter.py [--workers 6] [--jobs 10] [--poll-interval 10]
                                       [--idle-seconds 20] [--heartbeat S] [--tree PATH]

``--workers`` ``runworker`` processes (``--poll-interval`` apart from their looks; the default
``POLL_INTERVAL`` is 1 s, a long poll shows what the looks alone do) wait, idle, on PostgreSQL.
Each names its sessions (``PGAPPNAME``), so the worker behind a waiter's listening session is
known. Then, with every worker waiting again before each job:

- ``healthy``: ``--jobs`` no-op jobs, one at a time (``Job.enqueue``);
- ``frozen``: the same, but just before each enqueue the worker it will tell (the waiter the
  trigger takes first: idle, the one that began waiting last) is stopped with SIGSTOP, and
  continued (SIGCONT) once another worker has started the job.

For each: each job's wait from ``created_at`` to ``started_at`` (both by the database's clock),
median and maximum, and which worker ran it. Before them, ``idle``: for ``--idle-seconds`` with
every worker idle, the statements the workers sent (claims at the poll, looks, heartbeats),
counted in them (``benchmarks/frozen_app``), per second in all and per worker. ``--tree``: run
the workers from another checkout of the project (e.g. ``git archive <commit> | tar -x -C
/tmp/before``, with this benchmark's ``frozen_app`` and ``settings_frozen.py`` copied into its
``benchmarks/``) to compare. Writes the figures as JSON to ``benchmarks/results/``.
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

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_django_jobs_frozen")

import psycopg  # noqa: E402

from benchmarks.throughput import DB_NAME, bench_database, dsn, write_json  # noqa: E402

APP = "frozen-bench-"


def start_workers(args: argparse.Namespace, counts: Path) -> list[subprocess.Popen]:
    tree = Path(args.tree).resolve() if args.tree else ROOT
    logs = ROOT / "benchmarks" / "results"
    logs.mkdir(parents=True, exist_ok=True)
    return [subprocess.Popen(
        [sys.executable, "-m", "django", "runworker", "--settings=benchmarks.settings_frozen",
         "--worker-id", f"w{i}", "--poll-interval", str(args.poll_interval),
         *(["--heartbeat", str(args.heartbeat), "--lease", str(max(30.0, 3 * args.heartbeat))]
           if args.heartbeat else [])],
        cwd=tree, env={**os.environ, "PGAPPNAME": f"{APP}{i}", "BENCH_COUNTS_DIR": str(counts),
                       "PYTHONPATH": f"{tree}:{ROOT}"},
        stdout=open(logs / f"frozen-waiter-{i}.log", "w"), stderr=subprocess.STDOUT,
    ) for i in range(args.workers)]


def all_waiting(control: psycopg.Connection, count: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while control.execute("SELECT count(*) FROM django_jobs_waiter WHERE waiting IS NOT NULL"
                          ).fetchone()[0] < count:
        if time.monotonic() > deadline:
            raise RuntimeError("the workers are not all waiting; see benchmarks/results")
        time.sleep(0.05)


def next_told(control: psycopg.Connection) -> int:
    """The index of the worker the next enqueue tells (migration 0024's order)."""
    row = control.execute(
        "SELECT a.application_name FROM django_jobs_waiter AS w "
        "JOIN pg_stat_activity AS a ON a.pid = w.pid WHERE w.waiting IS NOT NULL "
        "ORDER BY w.holding, w.waiting DESC, w.pid LIMIT 1").fetchone()
    return int(row[0][len(APP):])


def one_job(control: psycopg.Connection, workers: list[subprocess.Popen],
            freeze: bool, timeout: float) -> dict:
    from django_jobs.models import Job

    all_waiting(control, len(workers))
    time.sleep(0.2)  # past the claims' own moment: every worker idle in its wait
    told = next_told(control)
    if freeze:
        workers[told].send_signal(signal.SIGSTOP)
    try:
        job = Job.enqueue("bench.noop")
        deadline = time.monotonic() + timeout
        while (row := control.execute(
                "SELECT extract(epoch FROM started_at - created_at), worker_id "
                "FROM django_jobs_job WHERE id = %s AND started_at IS NOT NULL",
                [job.pk]).fetchone()) is None:
            if time.monotonic() > deadline:
                raise RuntimeError(f"job {job.pk} did not start within {timeout} s")
            time.sleep(0.01)
    finally:
        if freeze:
            workers[told].send_signal(signal.SIGCONT)
    return {"wait_s": float(row[0]), "ran_on": row[1], "told": f"w{told}"}


def idle_cost(counts: Path, workers: int, seconds: float) -> dict:
    """Statements per second the idle workers sent, counted in them
    (``benchmarks/frozen_app``)."""
    def count() -> int:
        return sum(json.loads(path.read_text() or "{}").get("statements", 0)
                   for path in counts.glob("*.json"))

    time.sleep(1.0)  # past the workers' last writes of their counts
    before = count()
    time.sleep(seconds)
    after = count()
    per_s = (after - before) / seconds
    return {"statements_per_s": per_s, "per_worker": per_s / workers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=6)
    parser.add_argument("--jobs", type=int, default=10, help="jobs per set-up")
    parser.add_argument("--poll-interval", type=float, default=10.0)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--heartbeat", type=float, default=None,
                        help="runworker --heartbeat (default: HEARTBEAT_SECONDS); a long one "
                        "leaves the idle workers' looks and polls alone in the count")
    parser.add_argument("--tree", help="run the workers from this checkout instead")
    args = parser.parse_args()
    with bench_database():
        with psycopg.connect(dsn(DB_NAME), autocommit=True) as control:
            counts = Path(tempfile.mkdtemp(prefix="frozen-waiter-"))
            workers = start_workers(args, counts)
            try:
                all_waiting(control, args.workers)
                time.sleep(4.0)  # the listeners' test notifications are settled
                idle = idle_cost(counts, args.workers, args.idle_seconds)
                print(f"idle: {idle['statements_per_s']:.1f} statements/s for "
                      f"{args.workers} workers ({idle['per_worker']:.2f} each)", flush=True)
                figures: dict = {"idle": idle}
                for name, freeze in (("healthy", False), ("frozen", True)):
                    runs = [one_job(control, workers, freeze, 3 * args.poll_interval + 30)
                            for _ in range(args.jobs)]
                    waits = sorted(r["wait_s"] for r in runs)
                    figures[name] = {
                        "wait_median_s": statistics.median(waits), "wait_max_s": waits[-1],
                        "ran_on_told": sum(r["ran_on"] == r["told"] for r in runs),
                        "runs": runs,
                    }
                    print(f"{name}: wait median {statistics.median(waits) * 1000:.0f} ms, max "
                          f"{waits[-1] * 1000:.0f} ms; run by the worker told: "
                          f"{figures[name]['ran_on_told']} of {len(runs)}", flush=True)
            finally:
                for worker in workers:
                    worker.send_signal(signal.SIGCONT)
                    worker.terminate()
                for worker in workers:
                    worker.wait(timeout=60)
                shutil.rmtree(counts)
        path = write_json("frozen-waiter", args, **figures)
        print(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
