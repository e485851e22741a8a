"""A drain of one group's jobs against the drain of the same jobs without a group; with
``--flows``, workflows' steps against chains of plain jobs.

    python benchmarks/group_drain.py [--jobs 100000] [--repeat 1] [--workers 4] [--flows]

Each drain: the tables emptied, ``--jobs`` no-op jobs enqueued, either plainly
(``enqueue_many``) or as one group with a no-op callback (``enqueue_group``; its time is
reported as ``enqueue_seconds``), the table analyzed; then ``--workers`` ``runworker --burst``
processes, as shipped, start while the benchmark holds a lock on the table
(``benchmarks/drain.py``), and the clock starts when they all wait for it. The rate is the
jobs over the seconds from the start to the last of them's ``finished_at`` (the group's
callback not among them). Every finish of a job of the group adds to the group's row in the
finish's transaction, so the workers' turns that finish jobs of it queue on that row: the
figure is what that costs.

Each drain checks that every job completed once and, for the group, that its counts are the
jobs' and its callback was enqueued once (a ``--burst`` worker may exit before it runs it); and
that the server saw no deadlock (``pg_stat_database``). Prints each rate and the group's over
the plain one (the median over repeats of the ratio within each; target at least 0.8), and
writes the figures as JSON to ``benchmarks/results/``. ``BENCH_DB_NAME`` names the scratch
database (default ``bench_group_drain``); it is dropped at the end.

``--flows``: ``--jobs`` / 5 chains of five plain jobs (each link enqueues the next with
``enqueue_after_success``, committed with its completion) against as many workflows of five
atomic no-op steps (each step a transaction with its checkpoint, fenced on the lease); the
rate is steps (links or steps) per second, and the ratio the workflow's over the chain's: what
a checkpointed step costs against a job of its own. """

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_group_drain")

from benchmarks import throughput  # noqa: E402
from benchmarks.drain import command, reap, wait_until_blocked  # noqa: E402

TABLE = "django_jobs_job"
TARGET = 0.8
BATCH = 10_000


def fill(kind: str, count: int) -> float:
    """Enqueue the drain's jobs; returns the seconds it took."""
    from django_jobs import enqueue_group
    from django_jobs.models import Job

    started = time.monotonic()
    if kind == "group":
        enqueue_group("bench", [("bench.noop", {"n": n}) for n in range(count)],
                      callback="bench.noop", callback_payload={"callback": True})
    else:
        for start in range(0, count, BATCH):
            Job.enqueue_many("bench.noop", [{"n": n} for n in range(start, min(start + BATCH,
                                                                               count))])
    return time.monotonic() - started


def deadlocks(control: psycopg.Connection) -> int:
    return int(control.execute("SELECT deadlocks FROM pg_stat_database "
                               "WHERE datname = current_database()").fetchone()[0])


def one_drain(kind: str, args: argparse.Namespace, control: psycopg.Connection
              ) -> dict[str, Any]:
    throughput.reset(control)
    control.execute("TRUNCATE django_jobs_jobgroup, django_jobs_jobgroupmember, "
                    "django_jobs_jobstat RESTART IDENTITY CASCADE")
    enqueue_seconds = fill(kind, args.jobs)
    control.execute(f"ANALYZE {TABLE}")
    before = deadlocks(control)
    dsn = control.info.dsn
    logs = [tempfile.TemporaryFile() for _ in range(args.workers)]
    with control.transaction():
        control.execute(f"LOCK TABLE {TABLE} IN EXCLUSIVE MODE")
        procs = [subprocess.Popen(command("ours", i, args, dsn, options=[]), cwd=ROOT,
                                  stdout=log, stderr=subprocess.STDOUT)
                 for i, log in enumerate(logs)]
        wait_until_blocked(control, TABLE, procs, logs)
        started = float(control.execute("SELECT extract(epoch FROM clock_timestamp())")
                        .fetchone()[0])
    reap(procs, logs)
    members = "group_id IS NOT NULL" if kind == "group" else "TRUE"
    once, last = control.execute(
        f"SELECT count(*) FILTER (WHERE status = 'completed' AND attempt = 1), "
        f"extract(epoch FROM max(finished_at)) FROM {TABLE} WHERE {members}").fetchone()
    if once != args.jobs:
        raise RuntimeError(f"{kind}: {once} of {args.jobs} jobs completed once")
    if kind == "group":
        total, completed, callback, error = control.execute(
            "SELECT total, completed, callback_job_id, error FROM django_jobs_jobgroup"
        ).fetchone()
        callbacks = control.execute(f"SELECT count(*) FROM {TABLE} WHERE group_id IS NULL"
                                    ).fetchone()[0]
        if (total, completed, error, callbacks) != (args.jobs, args.jobs, None, 1) or \
                callback is None:
            raise RuntimeError(f"group: total {total}, completed {completed}, error {error}, "
                               f"{callbacks} callback jobs")
    seconds = float(last) - started
    ends = [float(control.execute(
        f"SELECT extract(epoch FROM finished_at) FROM {TABLE} WHERE {members} "
        f"ORDER BY finished_at OFFSET %s LIMIT 1", (args.jobs * tenth // 10 - 1,)).fetchone()[0])
        for tenth in range(1, 11)]
    tenths = [round(end - start, 3) for start, end in zip([started, *ends], ends, strict=False)]
    return {"rate": args.jobs / seconds, "seconds": seconds, "tenths_seconds": tenths,
            "enqueue_seconds": enqueue_seconds, "deadlocks": deadlocks(control) - before}


STEPS = 5


def one_flow_drain(kind: str, args: argparse.Namespace, control: psycopg.Connection
                   ) -> dict[str, Any]:
    """``--jobs`` steps as ``--jobs`` / 5 chains of plain jobs or workflows, drained."""
    from django_jobs.models import Job

    throughput.reset(control)
    control.execute("TRUNCATE django_jobs_workflowstep, django_jobs_workflowevent, "
                    "django_jobs_jobstat RESTART IDENTITY CASCADE")
    flows = args.jobs // STEPS
    if kind == "chain":
        Job.enqueue_many("bench.chain", [{"left": STEPS - 1}] * flows)
    else:
        Job.enqueue_many("bench.workflow", [{"steps": STEPS}] * flows)
    control.execute(f"ANALYZE {TABLE}")
    dsn = control.info.dsn
    logs = [tempfile.TemporaryFile() for _ in range(args.workers)]
    with control.transaction():
        control.execute(f"LOCK TABLE {TABLE} IN EXCLUSIVE MODE")
        procs = [subprocess.Popen(command("ours", i, args, dsn, options=[]), cwd=ROOT,
                                  stdout=log, stderr=subprocess.STDOUT)
                 for i, log in enumerate(logs)]
        wait_until_blocked(control, TABLE, procs, logs)
        started = float(control.execute("SELECT extract(epoch FROM clock_timestamp())")
                        .fetchone()[0])
    reap(procs, logs)
    done, last = control.execute(
        f"SELECT count(*) FILTER (WHERE status = 'completed' AND attempt = 1), "
        f"extract(epoch FROM max(finished_at)) FROM {TABLE}").fetchone()
    expected = flows * STEPS if kind == "chain" else flows
    steps = control.execute("SELECT count(*) FROM django_jobs_workflowstep").fetchone()[0]
    if done != expected or (kind == "workflow" and steps != flows * STEPS):
        raise RuntimeError(f"{kind}: {done} of {expected} jobs completed once, {steps} steps")
    seconds = float(last) - started
    return {"rate": flows * STEPS / seconds, "seconds": seconds}


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100_000, help="jobs per drain")
    parser.add_argument("--repeat", type=int, default=1, help="repeats; medians are reported")
    parser.add_argument("--workers", type=int, default=4, help="runworker processes")
    parser.add_argument("--flows", action="store_true",
                        help="workflows' steps against chains of plain jobs")
    args = parser.parse_args()
    if args.jobs < 10 or args.repeat < 1 or args.workers < 1:
        parser.error("--jobs must be at least 10, --repeat and --workers at least 1")
    return args


def main() -> None:
    args = parse_args()
    if args.flows:
        return flows_main(args)
    runs: dict[str, list[dict[str, Any]]] = {"plain": [], "group": []}
    with (
        throughput.bench_database(),
        psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as control,
    ):
        for index in range(args.repeat):
            for kind in ("plain", "group") if index % 2 == 0 else ("group", "plain"):
                runs[kind].append(one_drain(kind, args, control))
                print(f"{kind}: {runs[kind][-1]}", flush=True)
        ratio = statistics.median(g["rate"] / p["rate"]
                                  for p, g in zip(runs["plain"], runs["group"], strict=True))
        path = throughput.write_json("group-drain", args, runs=runs, group_over_plain=ratio,
                                     target=TARGET)
    for kind, done in runs.items():
        print(f"{kind:6} {statistics.median(r['rate'] for r in done):10.0f} jobs/s, "
              f"deadlocks {sum(r['deadlocks'] for r in done)}")
    print(f"group over plain: {ratio:.3f} (target at least {TARGET}); {path}")



def flows_main(args: argparse.Namespace) -> None:
    runs: dict[str, list[dict[str, Any]]] = {"chain": [], "workflow": []}
    with (
        throughput.bench_database(),
        psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as control,
    ):
        for index in range(args.repeat):
            for kind in ("chain", "workflow") if index % 2 == 0 else ("workflow", "chain"):
                runs[kind].append(one_flow_drain(kind, args, control))
                print(f"{kind}: {runs[kind][-1]}", flush=True)
        ratio = statistics.median(w["rate"] / c["rate"]
                                  for c, w in zip(runs["chain"], runs["workflow"], strict=True))
        path = throughput.write_json("workflow-steps", args, runs=runs,
                                     workflow_over_chain=ratio)
    for kind, done in runs.items():
        print(f"{kind:8} {statistics.median(r['rate'] for r in done):10.0f} steps/s")
    print(f"workflow steps over chained jobs: {ratio:.3f}; {path}")


if __name__ == "__main__":
    main()
