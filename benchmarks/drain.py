"""One timed drain: N no-op jobs, W worker processes, ours (``runworker --burst``) or raw.

Both kinds of worker start while the benchmark holds an EXCLUSIVE lock on their table, so each
blocks on its first statement that writes to it or locks its rows: for both, the first claim
(our worker's start-up, registering and a first heartbeat that finds nothing to rescue, only
reads the table, which the lock allows). The clock starts when every worker is waiting and the
lock is released, and stops at the last job's ``finished_at``. Process start-up (importing
Django takes a few hundred ms on this machine) is reported apart and not in the rate.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

from benchmarks import rawloop

ROOT = Path(__file__).resolve().parent.parent
TABLES = {"ours": "django_jobs_job", "raw": rawloop.TABLE}
WAIT_LIMIT_SECONDS = 600


def fill(side: str, count: int, raw: psycopg.Connection, job_type: str = "bench.noop") -> None:
    if side == "raw":
        rawloop.enqueue_bulk(raw, count)
        return
    from django_jobs.models import Job

    Job.enqueue_many(job_type, [{"n": n} for n in range(count)])


def command(side: str, index: int, args: argparse.Namespace, dsn: str,
            options: list[str] | None = None) -> list[str]:
    """A worker's command line; ``options`` replace our worker's usual benchmark options, and
    are added to the raw loop's."""
    if side == "raw":
        return [sys.executable, "-m", "benchmarks.rawloop", dsn, "--k", str(args.k),
                "--worker-id", f"raw-{index}", *(options or [])]
    if options is None:
        options = ["--concurrency", str(args.concurrency), "--prefetch", "0", "-v", "0"]
    return [sys.executable, "-m", "django", "runworker", "--settings=benchmarks.settings",
            "--burst", *options, "--worker-id", f"bench-{index}"]


def drain(side: str, workers: int, args: argparse.Namespace, control: psycopg.Connection,
          raw: psycopg.Connection, options: list[str] | None = None, analyze: bool = True,
          env: dict[str, str] | None = None, job_type: str = "bench.noop",
          waiters: int | None = None) -> dict[str, Any]:
    """``analyze=False`` leaves the table's statistics as they are (never gathered, on a new
    table whose autovacuum is off). ``waiters``: the processes that wait for the table lock,
    if not one per worker (``runworker --processes``: the supervisor's children)."""
    table = TABLES[side]
    fill(side, args.jobs, raw, job_type)
    if analyze:
        control.execute(f"ANALYZE {table}")
    dsn = raw.info.dsn
    logs = [tempfile.TemporaryFile() for _ in range(workers)]
    spawned = time.time()
    with control.transaction():
        control.execute(f"LOCK TABLE {table} IN EXCLUSIVE MODE")
        procs = [
            subprocess.Popen(command(side, i, args, dsn, options), cwd=ROOT, stdout=log,
                             stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
            for i, log in enumerate(logs)
        ]
        wait_until_blocked(control, table, procs, logs, waiters)
        startup_cpu = sum(cpu_seconds(proc.pid) for proc in procs)  # blocked: it stands still
        started = time.time()
    rss = reap(procs, logs)
    exited = time.time()
    # A claim sets started_at to its transaction's now(), the same for every job it takes.
    completed, total, last, reruns, claims = control.execute(
        f"SELECT count(*) FILTER (WHERE status = 'completed'), count(*), "
        f"extract(epoch FROM max(finished_at)), count(*) FILTER (WHERE attempt <> 1), "
        f"count(DISTINCT (worker_id, started_at)) FROM {table}"
    ).fetchone()
    if completed != args.jobs or total != args.jobs or reruns:
        raise RuntimeError(f"{side} drain left {total - completed} of {total} jobs unfinished, "
                           f"{reruns} run more than once")
    if side == "ours":
        attempts = control.execute("SELECT count(*) FROM django_jobs_jobattempt").fetchone()[0]
        if attempts != args.jobs:
            raise RuntimeError(f"{attempts} attempt rows for {args.jobs} jobs")
    seconds = float(last) - started
    return {
        "rate": args.jobs / seconds, "seconds": seconds, "startup_seconds": started - spawned,
        "wall_seconds_with_startup_and_exit": exited - spawned,
        "peak_rss_kib": max(rss), "workers": workers, "startup_cpu_seconds": startup_cpu,
        "jobs_per_claim": args.jobs / claims,
    }


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a running process, from /proc (clock-tick resolution)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_blocked(control: psycopg.Connection, table: str, procs: list[subprocess.Popen],
                       logs: list, waiters: int | None = None) -> None:
    """Return once every worker process (or ``waiters`` processes) waits for the table
    lock."""
    deadline = time.monotonic() + WAIT_LIMIT_SECONDS
    while time.monotonic() < deadline:
        waiting = control.execute(
            "SELECT count(DISTINCT pid) FROM pg_locks WHERE relation = %s::regclass "
            "AND NOT granted", (table,)
        ).fetchone()[0]
        if waiting >= (waiters or len(procs)):
            return
        for i, proc in enumerate(procs):
            if proc.poll() is not None:
                raise RuntimeError(f"worker {i} exited early:\n{read(logs[i])}")
        time.sleep(0.02)
    raise RuntimeError("workers did not reach the table lock in time")


def reap(procs: list[subprocess.Popen], logs: list) -> list[int]:
    """Wait for the workers; return each one's peak resident memory in KiB.

    Read from ``VmHWM`` in /proc while it runs: ``wait4``'s ``ru_maxrss`` would report this
    (larger) benchmark process, whose memory a child shares between fork and exec.
    """
    peaks = [0] * len(procs)
    left = dict(enumerate(procs))
    deadline = time.monotonic() + WAIT_LIMIT_SECONDS
    while left and time.monotonic() < deadline:
        for i, proc in list(left.items()):
            peaks[i] = max(peaks[i], peak_rss_kib(proc.pid))
            if proc.poll() is None:
                continue
            del left[i]
            if proc.returncode != 0:
                raise RuntimeError(f"worker exited with {proc.returncode}:\n{read(logs[i])}")
            logs[i].close()
        time.sleep(0.01)
    if left:
        raise RuntimeError("workers did not finish in time")
    return peaks


def peak_rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:  # already gone
        pass
    return 0


def read(log: Any) -> str:
    log.seek(0)
    return log.read().decode(errors="replace")[-4000:]
