"""django-jobs and the raw loop directly and through PgBouncer (transaction and session
pooling), same run.

    python benchmarks/pgbouncer.py [--jobs 5000] [--repeat 3] [--wakeups 40]

Starts its own PgBouncer (Debian's package, on a free port, in front of the PostgreSQL that
PGHOST/PGPORT name) in each pool mode, with django-jobs at its defaults. Measures:

- the drain of ``--jobs`` no-op jobs by 4 worker processes (``--workers``; timed as in
  ``throughput.py``, see ``drain.py``), each set-up of ``SETUPS`` once per repeat, in an
  order that rotates between repeats: ``runworker --burst`` with no other option, and with
  batches of ``--concurrency`` (``--prefetch 0``), directly, through each pooler and directly
  with ``PREPARED_STATEMENTS`` off; the raw loop at k=10 (``rawloop.py``) directly and through
  each pooler, its statements prepared, bound on the server unprepared, or bound on the
  client. Each rate is given as a ratio to the direct drain of its own family in the same
  repeat, with the jobs each claim took (one statement per claim for ours, two for the raw
  loop);
- wake-up latency: one idle worker (``runworker`` with no options), jobs enqueued one at a time
  at random moments, and each job's ``started_at - created_at``, p50 and p95. Directly and in
  session pooling the worker is woken by NOTIFY; in transaction pooling it polls every
  ``POLL_INTERVAL`` (1 s by default).

Writes the figures as JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_django_jobs_pgbouncer")

import psycopg  # noqa: E402

from benchmarks.drain import drain  # noqa: E402
from benchmarks.throughput import (  # noqa: E402
    DB_NAME,
    bench_database,
    dsn,
    reset,
    write_json,
)
from tests.pgbouncer import BINARY, PgBouncer  # noqa: E402

POOL_MODES = ("transaction", "session")
DIRECT_PORT = os.environ.get("PGPORT", "5432")


class Setup(NamedTuple):
    family: str  # "ours", "ours-N" (batches of --concurrency) or "raw"
    route: str  # "direct" or a pool mode
    prepared: bool | None = None  # ours: PREPARED_STATEMENTS (None: detected)
    binding: str = "prepared"  # raw: rawloop.BINDINGS


SETUPS = {
    "ours direct": Setup("ours", "direct"),
    "ours transaction": Setup("ours", "transaction"),
    "ours session": Setup("ours", "session"),
    "ours direct unprepared": Setup("ours", "direct", prepared=False),
    "ours-N direct": Setup("ours-N", "direct"),
    "ours-N transaction": Setup("ours-N", "transaction"),
    "ours-N direct unprepared": Setup("ours-N", "direct", prepared=False),
    "raw direct": Setup("raw", "direct"),
    "raw direct server": Setup("raw", "direct", binding="server"),
    "raw direct client": Setup("raw", "direct", binding="client"),
    "raw transaction server": Setup("raw", "transaction", binding="server"),
    "raw transaction client": Setup("raw", "transaction", binding="client"),
    "raw session": Setup("raw", "session"),
}
WAKE_ROUTES = ("direct", *POOL_MODES)


def port(route: str, bouncers: dict[str, PgBouncer]) -> str:
    return str(bouncers[route].port) if route in bouncers else DIRECT_PORT


def route_env(route: str, bouncers: dict[str, PgBouncer], prepared: bool | None = None) -> None:
    """Point the next workers' environment at ``route``."""
    os.environ["PGPORT"] = port(route, bouncers)
    os.environ["BENCH_DJANGO_JOBS"] = (
        "{}" if prepared is None else f'{{"PREPARED_STATEMENTS": {str(prepared).lower()}}}'
    )


def drain_setup(name: str, args: argparse.Namespace, control: psycopg.Connection,
                bouncers: dict[str, PgBouncer]) -> dict:
    setup = SETUPS[name]
    reset(control)
    route_env(setup.route, bouncers, setup.prepared)
    if setup.family == "raw":
        # The raw workers connect as the filling connection does: through the route.
        with psycopg.connect(dsn(DB_NAME).replace(f"port={DIRECT_PORT}",
                                                  f"port={port(setup.route, bouncers)}"),
                             autocommit=True, prepare_threshold=None) as raw:
            return drain("raw", args.workers, args, control, raw, ["--binding", setup.binding])
    options = [] if setup.family == "ours" else [
        "--concurrency", str(args.concurrency), "--prefetch", "0", "-v", "0"]
    return drain("ours", args.workers, args, control, control, options)


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
    parser.add_argument("--wakeups", type=int, default=40,
                        help="jobs per wake-up measure (0: none)")
    parser.add_argument("--workers", type=int, default=4, help="worker processes per drain")
    parser.add_argument("--concurrency", type=int, default=4,
                        help="ours-N: runworker --concurrency, claiming only free slots")
    args = parser.parse_args()
    args.k = 10  # the raw loop's claim size
    if BINARY is None:
        print("skipped: pgbouncer is not installed (apt-get install pgbouncer)")
        return
    (ROOT / "benchmarks" / "results").mkdir(parents=True, exist_ok=True)
    bouncers = {mode: PgBouncer(mode) for mode in POOL_MODES}
    try:
        with bench_database():
            result = measure(args, bouncers)
            route_env("direct", bouncers)
            report(result, args)
    finally:
        for bouncer in bouncers.values():
            bouncer.stop()


def measure(args: argparse.Namespace, bouncers: dict[str, PgBouncer]) -> dict:
    """Every set-up's drain once per repeat, then the wake-ups of each route."""
    result: dict = {"drain": [], "wakeup_ms": {}, "loadavg": [loadavg()]}
    names = list(SETUPS)
    with psycopg.connect(dsn(DB_NAME), autocommit=True) as control:
        for index in range(args.repeat):
            shift = (index * 5) % len(names)
            drains = {name: drain_setup(name, args, control, bouncers)
                      for name in names[shift:] + names[:shift]}
            result["drain"].append(drains)
            result["loadavg"].append(loadavg())
            print(f"repeat {index + 1}: " + ", ".join(
                f"{name} {drains[name]['rate']:.0f}" for name in names), flush=True)
        for route in WAKE_ROUTES if args.wakeups else ():
            reset(control)
            route_env(route, bouncers)
            result["wakeup_ms"][route] = wakeups(route, args.wakeups, control)
    result["loadavg"].append(loadavg())
    return result


def loadavg() -> str:
    with open("/proc/loadavg") as load:
        return " ".join(load.read().split()[:3])


def report(result: dict, args: argparse.Namespace) -> None:
    print(f"\n{args.jobs} no-op jobs, {args.workers} workers --burst; ours-N: --concurrency "
          f"{args.concurrency} --prefetch 0 -v 0; raw: k={args.k}; median of {args.repeat} "
          f"(range); load average {', '.join(result['loadavg'])}")
    print(f"{'set-up':26} {'jobs/s':>7} {'/ direct, same family':>24} {'/ raw direct':>18} "
          f"{'jobs/claim':>10}")
    summary: dict = {"drain": {}, "wakeup": {}}
    for name, setup in SETUPS.items():
        runs = result["drain"]
        base = next(n for n, s in SETUPS.items() if s.family == setup.family and
                    s.route == "direct" and s.prepared is None and s.binding == "prepared")
        row = {
            "rate": statistics.median(r[name]["rate"] for r in runs),
            "ratio": spread([r[name]["rate"] / r[base]["rate"] for r in runs]),
            "to_raw": spread([r[name]["rate"] / r["raw direct"]["rate"] for r in runs]),
            "jobs_per_claim": statistics.median(r[name]["jobs_per_claim"] for r in runs),
        }
        summary["drain"][name] = row
        print(f"{name:26} {row['rate']:7.0f} {show(row['ratio']):>24} {show(row['to_raw']):>18} "
              f"{row['jobs_per_claim']:10.1f}")
    if result["wakeup_ms"]:
        print(f"\nwake-ups: {args.wakeups} jobs into one idle runworker")
    for route, latencies in result["wakeup_ms"].items():
        summary["wakeup"][route] = {"p50_ms": percentile(latencies, 0.5),
                                    "p95_ms": percentile(latencies, 0.95)}
        print(f"{route:12} p50 {summary['wakeup'][route]['p50_ms']:7.1f} ms   "
              f"p95 {summary['wakeup'][route]['p95_ms']:7.1f} ms")
    path = write_json("pgbouncer", args, summary=summary, repeats=result["drain"],
                      wakeup_ms=result["wakeup_ms"], loadavg=result["loadavg"])
    print(f"\nwritten to {path.relative_to(ROOT)}")


def spread(values: list[float]) -> list[float]:
    """Median, lowest and highest."""
    return [statistics.median(values), min(values), max(values)]


def show(values: list[float]) -> str:
    median, low, high = values
    return f"{median:.2f} ({low:.2f}-{high:.2f})"


if __name__ == "__main__":
    main()
