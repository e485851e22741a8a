"""django-jobs directly and through PgBouncer (transaction and session pooling), same run.

    python benchmarks/pgbouncer.py [--jobs 5000] [--repeat 3] [--wakeups 40]

Starts its own PgBouncer (Debian's package, on a free port, in front of the PostgreSQL that
PGHOST/PGPORT name) in each pool mode, with django-jobs at its defaults. Measures:

- the drain of ``--jobs`` no-op jobs by 4 ``runworker --burst`` processes (timed as in
  ``throughput.py``, see ``drain.py``), directly, through each pooler, and directly with
  ``PREPARED_STATEMENTS`` off (what transaction pooling costs by losing prepared statements
  alone), and the ratio of each to the direct drain of the same repeat (the order rotates
  between repeats);
- wake-up latency: one idle worker (``runworker`` with no options), jobs enqueued one at a time
  at random moments, and each job's ``started_at - created_at``, p50 and p95. Directly and in
  session pooling the worker is woken by NOTIFY; in transaction pooling it polls every
  ``POLL_INTERVAL`` (1 s by default).

Writes the figures as JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_django_jobs_pgbouncer")

import psycopg  # noqa: E402

from benchmarks.drain import drain  # noqa: E402
from benchmarks.throughput import (  # noqa: E402
    DB_NAME,
    create_database,
    drop_database,
    dsn,
    reset,
    setup_django,
)
from tests.pgbouncer import BINARY, PgBouncer  # noqa: E402

ROUTES = ("direct", "transaction", "session", "unprepared")
WAKE_ROUTES = ROUTES[:3]
DIRECT_PORT = os.environ.get("PGPORT", "5432")


def route_env(route: str, bouncers: dict[str, PgBouncer]) -> None:
    """Point the next workers' environment at ``route``."""
    os.environ["PGPORT"] = str(bouncers[route].port) if route in bouncers else DIRECT_PORT
    os.environ["BENCH_DJANGO_JOBS"] = (
        '{"PREPARED_STATEMENTS": false}' if route == "unprepared" else "{}"
    )


def wakeups(route: str, count: int, control: psycopg.Connection) -> list[float]:
    """Latencies (ms) from enqueue to start, one job at a time, into an idle worker."""
    from django_jobs.models import Job

    log = open(ROOT / "benchmarks" / "results" / f"wakeup-{route}.log", "w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "django", "runworker", "--settings=benchmarks.settings",
         "--worker-id", f"wake-{route}"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ},
    )
    try:
        deadline = time.monotonic() + 60
        while not control.execute("SELECT 1 FROM django_jobs_worker").fetchone():
            if time.monotonic() > deadline or proc.poll() is not None:
                raise RuntimeError(f"the {route} worker did not start; see {log.name}")
            time.sleep(0.05)
        time.sleep(4.0)  # its listener's test notification (PROBE_SECONDS) is settled
        for _ in range(count):
            time.sleep(random.uniform(0.2, 0.8))
            job = Job.enqueue("bench.noop", {})
            while control.execute("SELECT status FROM django_jobs_job WHERE id = %s",
                                  (job.pk,)).fetchone()[0] != "completed":
                time.sleep(0.005)
        rows = control.execute(
            "SELECT extract(epoch FROM started_at - created_at) * 1000 FROM django_jobs_job"
        ).fetchall()
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
    return [float(ms) for (ms,) in rows]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per drain")
    parser.add_argument("--repeat", type=int, default=3, help="drain repeats; medians reported")
    parser.add_argument("--wakeups", type=int, default=40, help="jobs per wake-up measure")
    parser.add_argument("--concurrency", type=int, default=4,
                        help="runworker --concurrency of each draining worker")
    args = parser.parse_args()
    args.k = 10  # drain.py's raw side, unused here
    if BINARY is None:
        print("skipped: pgbouncer is not installed (apt-get install pgbouncer)")
        return
    (ROOT / "benchmarks" / "results").mkdir(parents=True, exist_ok=True)
    create_database()
    bouncers = {mode: PgBouncer(mode) for mode in ("transaction", "session")}
    try:
        setup_django()
        result: dict = {"drain": [], "wakeup_ms": {}}
        with psycopg.connect(dsn(DB_NAME), autocommit=True) as control:
            for index in range(args.repeat):
                shift = index % len(ROUTES)
                rates = {}
                for route in ROUTES[shift:] + ROUTES[:shift]:
                    reset(control)
                    route_env(route, bouncers)
                    rates[route] = drain("ours", 4, args, control, control)["rate"]
                result["drain"].append(rates)
                print(f"repeat {index + 1}: " + ", ".join(
                    f"{route} {rates[route]:.0f} jobs/s" for route in ROUTES), flush=True)
            for route in WAKE_ROUTES:
                reset(control)
                route_env(route, bouncers)
                result["wakeup_ms"][route] = wakeups(route, args.wakeups, control)
        route_env("direct", bouncers)
        report(result, args)
    finally:
        from django.db import connections

        connections.close_all()
        for bouncer in bouncers.values():
            bouncer.stop()
        drop_database()


def report(result: dict, args: argparse.Namespace) -> None:
    print(f"\n{args.jobs} no-op jobs, 4 workers --burst --concurrency {args.concurrency}, "
          f"median of {args.repeat}; wake-ups: {args.wakeups} jobs into one idle worker")
    print(f"{'route':12} {'drain jobs/s':>13} {'/ direct':>9} {'wake p50 ms':>12} "
          f"{'wake p95 ms':>12}")
    summary = {}
    for route in ROUTES:
        rate = statistics.median(r[route] for r in result["drain"])
        ratio = statistics.median(r[route] / r["direct"] for r in result["drain"])
        summary[route] = {"drain": rate, "ratio": ratio}
        wake = ""
        if route in result["wakeup_ms"]:
            latencies = result["wakeup_ms"][route]
            summary[route].update(wake_p50_ms=percentile(latencies, 0.5),
                                  wake_p95_ms=percentile(latencies, 0.95))
            wake = f"{summary[route]['wake_p50_ms']:12.1f} {summary[route]['wake_p95_ms']:12.1f}"
        print(f"{route:12} {rate:13.0f} {ratio:9.2f} {wake}")
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = ROOT / "benchmarks" / "results" / f"pgbouncer-{stamp}.json"
    path.write_text(json.dumps({"when": stamp, "options": vars(args), "summary": summary,
                                **result}, indent=2))
    print(f"\nwritten to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
