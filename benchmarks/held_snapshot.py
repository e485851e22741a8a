"""A drain while a REPEATABLE READ session holds its snapshot open, against the same drain without.

    python benchmarks/held_snapshot.py [--jobs 100000] [--repeat 1] [--workers 4]
                                        [--only plain|held] [--from-front]
    python benchmarks/held_snapshot.py --paced 150 [--jobs 5000] [--workers 4]

An open snapshot keeps vacuum from removing the row versions that every claim and every finish
leave behind, and no scan may mark their index entries dead either. The claimed jobs' entries
stay at the front of the ready index, in the order the claim walks it; this measures what that
costs a drain as shipped.

Each drain: the job table emptied (``TRUNCATE``, so no drain inherits another's dead rows),
``--jobs`` pending no-op jobs written by one ``INSERT ... SELECT`` copying a job enqueued
through the ORM (a million ``enqueue_many`` would take longer than the drain), the table
analyzed; with ``held``, a second session then opens a REPEATABLE READ transaction, reads the
table (which takes its snapshot) and stays idle in it until the drain has ended. ``--workers``
``runworker --burst`` processes with no other option (as shipped) start while the benchmark
holds a lock on the table (``benchmarks/drain.py``); the clock starts when they all wait for it.
Each repeat runs ``plain`` and ``held``, in alternating order.

What is measured, per drain:

- the rate: jobs over the seconds from the start to the last job's ``finished_at``;
- per tenth of the jobs, in the order they finished: the seconds per thousand jobs (from their
  ``finished_at``: a claim that walks further makes every job of its tenth take longer) and the
  entries the claim's indexes handed out per job (``idx_tup_read`` of the two ready indexes, and
  of the lease index that a heartbeat's rescue reads), sampled every quarter second while the
  drain runs and taken at each tenth's end. A dead entry the claim passes over counts as read:
  the figure is the walk itself, not only its result.

``--from-front`` runs the workers through ``benchmarks/from_front.py``: the same ``runworker``
whose claim cursor never hands out a key, so every claim reads the ready index from its front
(``worker/producer.py``) and the drain shows what the key saves. The rescue is bounded as
shipped either way.

Prints, per kind, the rate and the last tenth over the first (seconds per job, and entries per
job), and the rate of ``held`` over ``plain`` (the median over repeats of the ratio within each);
writes the figures as JSON to ``benchmarks/results/``. ``BENCH_DB_NAME`` names the scratch
database (default ``bench_snapshot_held``); it is dropped at the end.

``--paced RATE`` measures instead the dead row versions a job's life leaves in each table while
the snapshot is held (``paced``): ``--workers`` ``runworker`` processes with no option wait on an
empty queue, the second session holds its snapshot, and this process enqueues ``--jobs`` no-op
jobs one per transaction (``Job.enqueue``) at RATE jobs/s; once all are completed the workers
stop (SIGTERM: a stopping worker writes what it still holds). Vacuum and pruning can remove
nothing the snapshot may see, so ``n_dead_tup`` of ``pg_stat_user_tables`` (summed over a
partitioned table's partitions) counts every row version the drain left dead. Prints, per
table (the jobs, their attempts, the wake-up registry ``django_jobs_waiter``, the counts
``django_jobs_jobstat``), the dead rows per job and their ratio to the jobs table's own, and the
pickup latency (``run_at`` to ``started_at``) p50 and p99.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_snapshot_held")

from benchmarks import throughput  # noqa: E402
from benchmarks.drain import command, reap, wait_until_blocked  # noqa: E402

TABLE = "django_jobs_job"
INDEXES = {
    "ready": ("django_jobs_ready_any_idx", "django_jobs_ready_idx"),
    "lease": ("django_jobs_lease_idx",),
}
TARGETS = {"last_over_first": 1.5, "held_over_plain": 0.8}
SAMPLE_SECONDS = 0.25
WAIT_SECONDS = 600  # at most this long for a paced run's jobs to be completed after the last


def fill(control: psycopg.Connection, count: int) -> None:
    """``count`` pending no-op jobs: one through the ORM, the rest copies of its row made by
    the server, each with its own public id and a run_at one microsecond after the last."""
    from django_jobs.models import Job

    first = Job.enqueue("bench.noop", {})
    columns = [
        f.column
        for f in Job._meta.concrete_fields
        if f.column not in ("id", "public_id", "run_at", "created_at")
    ]
    listed = ", ".join(f'"{c}"' for c in columns)
    copied = ", ".join(f't."{c}"' for c in columns)
    control.execute(
        f"INSERT INTO {TABLE} (public_id, run_at, created_at, {listed}) "
        f"SELECT 'j-' || lpad(to_hex(g), 20, '0'), t.run_at + g * interval '1 microsecond', "
        f"t.created_at, {copied} "
        f"FROM {TABLE} AS t, generate_series(1, %s) AS g WHERE t.id = %s",
        (count - 1, first.pk),
    )
    control.execute(f"ANALYZE {TABLE}")


def from_front(line: list[str], wanted: bool) -> list[str]:
    """A worker's command line, run through ``benchmarks/from_front.py`` if ``wanted``."""
    if not wanted:
        return line
    django = line.index("django")  # [python, "-m", "django", "runworker", ...]
    return [*line[:django], "benchmarks.from_front", *line[django + 2:]]


def index_reads(control: psycopg.Connection) -> dict[str, int]:
    """The entries each kind of index (``INDEXES``) has handed out to scans so far.

    On PostgreSQL the job table is a partitioned parent: its indexes are partitioned indexes,
    which have no statistics of their own, so each figure is the sum over the partitions'
    indexes, named by the parent index they belong to (``pg_partition_root``). A plain table's
    indexes are read as they are."""
    rows = dict(
        control.execute(
            "SELECT coalesce(pg_partition_root(s.indexrelid), s.indexrelid)::regclass::text, "
            "sum(s.idx_tup_read)::bigint FROM pg_stat_user_indexes AS s "
            "WHERE s.relid = %s::regclass "
            "OR s.relid IN (SELECT relid FROM pg_partition_tree(%s::regclass)) GROUP BY 1",
            (TABLE, TABLE),
        ).fetchall()
    )
    return {kind: sum(rows.get(name, 0) for name in names) for kind, names in INDEXES.items()}


class Sampler(threading.Thread):
    """Reads ``index_reads`` with the server's time every ``SAMPLE_SECONDS`` until stopped."""

    def __init__(self, dsn: str) -> None:
        super().__init__(daemon=True)
        self.dsn, self.samples, self.done = dsn, [], threading.Event()

    def run(self) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            while True:
                # The statistics a backend has not flushed yet are read as they were.
                conn.execute("SELECT pg_stat_clear_snapshot()")
                now = conn.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0]
                self.samples.append((float(now), index_reads(conn)))
                if self.done.wait(SAMPLE_SECONDS):
                    return

    def at(self, moment: float) -> dict[str, int]:
        """The first sample taken at or after ``moment`` (the last if none is)."""
        for when, reads in self.samples:
            if when >= moment:
                return reads
        return self.samples[-1][1]


def one_drain(args: argparse.Namespace, control: psycopg.Connection, held: bool,
              options: list[str] | None = None,
              prepare: Callable[[], None] | None = None) -> dict[str, Any]:
    """One drain; ``options``: the workers' options (none, as shipped); ``prepare``: run on the
    filled table before the drain (``benchmarks/queue_count.py`` places the jobs' queues)."""
    throughput.reset(control)
    fill(control, args.jobs)
    if prepare is not None:
        prepare()
    dsn = control.info.dsn
    holder = psycopg.connect(dsn)  # not autocommit: its transaction stays open
    if held:
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute(f"SELECT count(*) FROM {TABLE}").fetchone()  # the snapshot is taken
    sampler = Sampler(dsn)
    logs = [tempfile.NamedTemporaryFile(prefix="held-snapshot-worker-", suffix=".log", delete=False)
            for _ in range(args.workers)]
    try:
        with control.transaction():
            control.execute(f"LOCK TABLE {TABLE} IN EXCLUSIVE MODE")
            procs = [
                subprocess.Popen(
                    from_front(command("ours", i, args, dsn, options=options or []),
                               args.from_front),
                    cwd=ROOT,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
                for i, log in enumerate(logs)
            ]
            wait_until_blocked(control, TABLE, procs, logs)
            sampler.start()
            started = float(
                control.execute("SELECT extract(epoch FROM clock_timestamp())").fetchone()[0]
            )
        reap(procs, logs)
        time.sleep(1.2)  # the workers' last statistics reach the shared counts
    finally:
        sampler.done.set()
        if sampler.is_alive():
            sampler.join()
        holder.close()
    completed = control.execute(
        f"SELECT count(*) FROM {TABLE} WHERE status = 'completed' AND attempt = 1"
    ).fetchone()[0]
    if completed != args.jobs:
        states = control.execute(
            f"SELECT status, attempt, count(*) FROM {TABLE} GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
        raise RuntimeError(f"{completed} of {args.jobs} jobs completed once; by status and "
                           f"attempt: {states}; the workers' logs: "
                           f"{', '.join(log.name for log in logs)}")
    for log in logs:
        os.unlink(log.name)
    ends = [started]  # the tenths' ends, by the jobs' finished_at
    for tenth in range(1, 11):
        offset = max(args.jobs * tenth // 10 - 1, 0)
        ends.append(
            float(
                control.execute(
                    f"SELECT extract(epoch FROM finished_at) FROM {TABLE} ORDER BY finished_at "
                    f"OFFSET %s LIMIT 1",
                    (offset,),
                ).fetchone()[0]
            )
        )
    tenths = []
    for tenth in range(10):
        jobs = args.jobs * (tenth + 1) // 10 - args.jobs * tenth // 10
        before, after = sampler.at(ends[tenth]), sampler.at(ends[tenth + 1])
        tenths.append(
            {
                "ms_per_1000_jobs": (ends[tenth + 1] - ends[tenth]) / jobs * 1e6,
                **{
                    f"{kind}_entries_per_job": (after[kind] - before[kind]) / jobs
                    for kind in INDEXES
                },
            }
        )
    seconds = ends[-1] - started
    return {"rate": args.jobs / seconds, "seconds": seconds, "tenths": tenths}


SIDE_TABLES = ("django_jobs_job", "django_jobs_jobattempt", "django_jobs_waiter",
               "django_jobs_jobstat")


def dead_rows(control: psycopg.Connection) -> dict[str, int]:
    """``n_dead_tup`` of each of ``SIDE_TABLES``, a partitioned table's summed over its
    partitions, as the shared statistics hold it now."""
    control.execute("SELECT pg_stat_clear_snapshot()")
    return {
        table: int(control.execute(
            "SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables "
            "WHERE relid = %s::regclass "
            "OR relid IN (SELECT relid FROM pg_partition_tree(%s::regclass))",
            (table, table)).fetchone()[0])
        for table in SIDE_TABLES
    }


def paced(args: argparse.Namespace, control: psycopg.Connection) -> dict[str, Any]:
    """One paced run with the snapshot held (see the module's docstring)."""
    import signal

    from django_jobs.models import Job

    throughput.reset(control)
    control.execute("TRUNCATE django_jobs_jobstat")
    control.execute("DELETE FROM django_jobs_waiter")
    dsn = control.info.dsn
    logs = [tempfile.NamedTemporaryFile(prefix="held-snapshot-worker-", suffix=".log", delete=False)
            for _ in range(args.workers)]
    procs = [subprocess.Popen(
        [sys.executable, "-m", "django", "runworker", "--settings=benchmarks.settings",
         "--worker-id", f"paced-{i}"], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        for i, log in enumerate(logs)]
    holder = psycopg.connect(dsn)  # not autocommit: its transaction stays open
    try:
        deadline = time.monotonic() + 120
        while control.execute("SELECT count(*) FROM django_jobs_worker").fetchone()[0] < len(procs):
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                raise RuntimeError(f"the workers did not start: {[log.name for log in logs]}")
            time.sleep(0.1)
        time.sleep(3.0)  # listening, and their first claims made
        Job.enqueue("bench.noop", {})  # this process connects and prepares before the count
        while control.execute("SELECT count(*) FROM django_jobs_job WHERE status <> 'completed'"
                              ).fetchone()[0]:
            time.sleep(0.1)
        holder.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        holder.execute(f"SELECT count(*) FROM {TABLE}").fetchone()  # the snapshot is taken
        time.sleep(1.2)  # the statistics of what came before reach the shared counts
        before = dead_rows(control)
        start = time.perf_counter()
        for done in range(args.jobs):
            ahead = start + done / args.paced - time.perf_counter()
            if ahead > 0:
                time.sleep(ahead)
            Job.enqueue("bench.noop", {"n": done})
        enqueued = time.perf_counter() - start
        deadline = time.monotonic() + WAIT_SECONDS
        while control.execute("SELECT count(*) FROM django_jobs_job WHERE status <> 'completed'"
                              ).fetchone()[0]:
            if time.monotonic() > deadline:
                raise RuntimeError("the jobs were not all completed in time")
            time.sleep(0.1)
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            proc.wait(timeout=60)
        time.sleep(1.2)  # the workers' last statistics reach the shared counts
        after = dead_rows(control)
        p50, p99 = control.execute(
            "SELECT percentile_cont(ARRAY[0.5, 0.99]) WITHIN GROUP (ORDER BY "
            "extract(epoch FROM started_at - run_at)) FROM django_jobs_job "
            "WHERE (payload->>'n') IS NOT NULL").fetchone()[0]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
        holder.close()
    for log in logs:
        log.close()
        os.unlink(log.name)
    dead = {table: after[table] - before[table] for table in SIDE_TABLES}
    own = dead[TABLE] / args.jobs
    return {
        "enqueue_rate": args.jobs / enqueued,
        "dead_per_job": {table: count / args.jobs for table, count in dead.items()},
        "over_job_rows": {table: (count / args.jobs) / own if own else None
                          for table, count in dead.items()},
        "pickup_p50_ms": float(p50) * 1000, "pickup_p99_ms": float(p99) * 1000,
    }


def print_paced(args: argparse.Namespace, runs: list[dict[str, Any]]) -> dict[str, Any]:
    summary: dict[str, Any] = {"runs": runs}
    print(f"{args.jobs:,} jobs enqueued one by one at {args.paced:g}/s, {args.workers} workers "
          f"as shipped, a snapshot held throughout; {args.repeat} repeat(s), medians")
    print(f"{'table':<24} {'dead/job':>9} {'/ job rows':>11}")
    for table in SIDE_TABLES:
        per_job = statistics.median(r["dead_per_job"][table] for r in runs)
        ratio = statistics.median(r["over_job_rows"][table] or 0.0 for r in runs)
        summary[table] = {"dead_per_job": per_job, "over_job_rows": ratio}
        print(f"{table:<24} {per_job:>9.3f} {ratio:>11.3f}")
    for key in ("pickup_p50_ms", "pickup_p99_ms", "enqueue_rate"):
        summary[key] = statistics.median(r[key] for r in runs)
    print(f"pickup latency p50 {summary['pickup_p50_ms']:.1f} ms, "
          f"p99 {summary['pickup_p99_ms']:.1f} ms; enqueued at {summary['enqueue_rate']:.0f}/s")
    return summary


def growth(tenths: list[dict[str, float]], key: str) -> float:
    first, last = tenths[0][key], tenths[-1][key]
    return last / first if first else float("inf") if last else 1.0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs per drain")
    parser.add_argument("--repeat", type=int, default=1, help="repeats; medians are reported")
    parser.add_argument("--workers", type=int, default=4, help="runworker processes")
    parser.add_argument("--only", choices=("plain", "held"), help="run one kind only")
    parser.add_argument("--from-front", action="store_true",
                        help="every claim reads the ready index from its front (no key)")
    parser.add_argument("--paced", type=float, metavar="RATE",
                        help="enqueue at RATE jobs/s and count each table's dead rows per job")
    args = parser.parse_args()
    if args.jobs < 10 or args.repeat < 1 or args.workers < 1:
        parser.error("--jobs must be at least 10, --repeat and --workers at least 1")
    return args


def main() -> None:
    args = parse_args()
    if args.paced:
        with (
            throughput.bench_database(),
            psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as control,
        ):
            runs = [paced(args, control) for _ in range(args.repeat)]
        summary = print_paced(args, runs)
        print(f"written to {throughput.write_json('held_snapshot_paced', args, summary=summary)}")
        return
    kinds = [args.only] if args.only else ["plain", "held"]
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    with (
        throughput.bench_database(),
        psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as control,
    ):
        for index in range(args.repeat):
            for kind in kinds if index % 2 == 0 else kinds[::-1]:
                runs[kind].append(one_drain(args, control, held=kind == "held"))
    claims = "every claim from the index's front" if args.from_front else "as shipped"
    print(
        f"{args.jobs:,} jobs, {args.workers} workers {claims}, {args.repeat} repeat(s); "
        f"last tenth / first tenth"
    )
    print(
        f"{'kind':<6} {'jobs/s':>8} {'s/job':>7} {'ready/job':>10} {'lease/job':>10}  "
        f"ready entries per job, first -> last tenth"
    )
    summary: dict[str, Any] = {}
    for kind, drains in runs.items():
        figures = {
            "rate": statistics.median(d["rate"] for d in drains),
            "time_growth": statistics.median(
                growth(d["tenths"], "ms_per_1000_jobs") for d in drains
            ),
            "ready_growth": statistics.median(
                growth(d["tenths"], "ready_entries_per_job") for d in drains
            ),
            "lease_growth": statistics.median(
                growth(d["tenths"], "lease_entries_per_job") for d in drains
            ),
        }
        summary[kind] = {**figures, "drains": drains}
        first, last = drains[0]["tenths"][0], drains[0]["tenths"][-1]
        print(
            f"{kind:<6} {figures['rate']:>8.0f} {figures['time_growth']:>7.2f} "
            f"{figures['ready_growth']:>10.2f} {figures['lease_growth']:>10.2f}  "
            f"{first['ready_entries_per_job']:.1f} -> {last['ready_entries_per_job']:.1f}; "
            f"ms per 1000 jobs {first['ms_per_1000_jobs']:.0f} -> "
            f"{last['ms_per_1000_jobs']:.0f}"
        )
    if len(kinds) == 2:
        ratio = statistics.median(
            h["rate"] / p["rate"] for h, p in zip(runs["held"], runs["plain"], strict=True)
        )
        summary["held_over_plain"] = ratio
        print(
            f"held / plain rate: {ratio:.2f} (target >= {TARGETS['held_over_plain']}); "
            f"held's s/job growth target <= {TARGETS['last_over_first']}"
        )
    print(f"written to {throughput.write_json('held_snapshot', args, summary=summary)}")


if __name__ == "__main__":
    main()
