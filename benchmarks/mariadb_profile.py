"""Where django-jobs spends its time on MariaDB: the bulk enqueue and one worker's drain.

    python benchmarks/mariadb_profile.py [--jobs 2000] [--concurrency 10]

Creates a scratch database (``BENCH_DB_NAME``, default ``bench_django_jobs_profile``), enqueues
no-op jobs with ``enqueue_many``, then drains them with one ``runworker --burst`` run in this
process; then the same with ``benchmarks/rawloop_mariadb.py``'s bulk insert and worker loop, in
this process too, for the CPU each side spends per job. Every round trip Django makes to MariaDB
is timed where it leaves Python: statements (``CursorWrapper``), commits, rollbacks and
autocommit switches (the MySQL backend sends each as its own round trip). The main thread, which
claims and finishes while the worker's threads run the handlers, is profiled with cProfile.
Printed for each phase: wall time, CPU per job, time waiting on the server, round trips per job
by kind, and the main thread's heaviest functions.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import re
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_django_jobs_profile")

from benchmarks import mariadb_throughput  # noqa: E402


class RoundTrips:
    """Round trips to the server by kind: count and seconds, from every thread."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_kind: dict[str, list[float]] = defaultdict(lambda: [0, 0.0])

    def add(self, kind: str, seconds: float) -> None:
        with self.lock:
            entry = self.by_kind[kind]
            entry[0] += 1
            entry[1] += seconds

    def clear(self) -> None:
        with self.lock:
            self.by_kind.clear()

    def total(self) -> float:
        return sum(seconds for _, seconds in self.by_kind.values())


TRIPS = RoundTrips()


def kind_of(sql: str) -> str:
    """A statement's shape: its text with value lists folded and cut to a readable length."""
    text = re.sub(r"\s+", " ", sql)
    text = re.sub(r"\((?:%s, )+%s\)", "(...)", text)
    text = re.sub(r"(, \(\.\.\.\))+", ", (...)", text)
    text = re.sub(r"`django_jobs_job`\.", "", text)
    return text[:150]


def instrument() -> None:
    """Time each round trip where Django hands it to the driver."""
    from django.db.backends.mysql.base import DatabaseWrapper
    from django.db.backends.utils import CursorWrapper

    def timed(method: Any, kind: Any) -> Any:
        def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return method(self, *args, **kwargs)
            finally:
                TRIPS.add(kind(*args), time.perf_counter() - start)
        return wrapper

    CursorWrapper._execute = timed(CursorWrapper._execute, lambda sql, *a: kind_of(sql))
    CursorWrapper._executemany = timed(CursorWrapper._executemany,
                                       lambda sql, *a: "many: " + kind_of(sql))
    DatabaseWrapper._commit = timed(DatabaseWrapper._commit, lambda *a: "COMMIT")
    DatabaseWrapper._rollback = timed(DatabaseWrapper._rollback, lambda *a: "ROLLBACK")
    DatabaseWrapper._set_autocommit = timed(
        DatabaseWrapper._set_autocommit, lambda on, *a: f"SET autocommit={int(on)}")


def report(title: str, jobs: int, wall: float, cpu: float, profile: cProfile.Profile,
           top: int) -> None:
    print(f"\n## {title}: {jobs} jobs in {wall:.3f} s ({jobs / wall:.0f} jobs/s), CPU of this "
          f"process {cpu * 1000 / jobs:.3f} ms per job; then again under cProfile:")
    server = TRIPS.total()
    trips = sum(count for count, _ in TRIPS.by_kind.values())
    print(f"round trips: {trips} ({trips / jobs:.2f} per job), {server * 1000 / jobs:.3f} ms "
          f"per job waiting on the server (summed over threads)")
    print(f"{'per job':>8} {'ms total':>9} {'ms each':>8}  statement")
    for kind, (count, seconds) in sorted(TRIPS.by_kind.items(), key=lambda kv: -kv[1][1]):
        print(f"{count / jobs:8.3f} {seconds * 1000:9.1f} {seconds * 1000 / count:8.3f}  {kind}")
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    print("main thread, by own time:")
    print("\n".join(out.getvalue().splitlines()[6:]))


def raw_side(raw: Any, jobs: int) -> None:
    """The raw loop's bulk insert and one worker, timed without a profiler."""
    from benchmarks import rawloop_mariadb as rawloop

    for title, run in (("raw bulk insert", lambda: rawloop.enqueue_bulk(raw, jobs)),
                       ("raw drain, 1 worker (k=10)",
                        lambda: rawloop.work(mariadb_throughput.DB_NAME, 10, "raw"))):
        wall, cpu = time.perf_counter(), time.process_time()
        run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"\n## {title}: {jobs} jobs in {wall:.3f} s ({jobs / wall:.0f} jobs/s), CPU of "
              f"this process {cpu * 1000 / jobs:.3f} ms per job")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--top", type=int, default=15, help="functions shown per phase")
    args = parser.parse_args()
    if min(args.jobs, args.concurrency, args.top) < 1:
        parser.error("--jobs, --concurrency and --top must be >= 1")
    raw = mariadb_throughput.setup()
    from django.core.management import call_command
    from django.db import connections

    from django_jobs.models import Job

    instrument()
    try:
        payloads = [{"n": n} for n in range(args.jobs)]
        Job.enqueue_many("bench.noop", payloads[:10])  # warm-up: imports, connection

        def enqueue() -> None:
            Job.enqueue_many("bench.noop", payloads)

        def fresh_queue() -> None:
            mariadb_throughput.reset(raw)
            enqueue()

        def drain() -> None:
            call_command("runworker", "--burst", "--concurrency", str(args.concurrency),
                         "--worker-id", "profile", verbosity=0)

        for title, prepare, run in (
            ("bulk enqueue", lambda: mariadb_throughput.reset(raw), enqueue),
            ("drain, 1 worker", fresh_queue, drain),
        ):
            prepare()  # first without the profiler: the phase's own wall time and CPU
            start, cpu = time.perf_counter(), time.process_time()
            run()
            wall, cpu = time.perf_counter() - start, time.process_time() - cpu
            prepare()
            TRIPS.clear()
            profile = cProfile.Profile()
            profile.enable()
            run()
            profile.disable()
            report(title, args.jobs, wall, cpu, profile, args.top)
        done = Job.objects.filter(status="completed").count()
        if done != args.jobs:
            raise RuntimeError(f"{done} of {args.jobs} jobs completed")
        raw_side(raw, args.jobs)
    finally:
        connections.close_all()
        raw.cursor().execute(f"DROP DATABASE IF EXISTS `{mariadb_throughput.DB_NAME}`")
        raw.close()


if __name__ == "__main__":
    main()
