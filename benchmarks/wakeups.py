"""Idle workers woken by single enqueues: one waiter per job against every worker, same run.

    python benchmarks/wakeups.py [--rate 1000] [--seconds 10] [--workers 4] [--repeat 3]

Four ``runworker`` processes with no options (``--workers``) wait, idle, on PostgreSQL; four
producer processes (``--producers``) then enqueue no-op jobs one at a time (``Job.enqueue``,
each its own transaction), paced to ``--rate`` jobs per second between them, for
``--seconds``. Each set-up runs once per repeat, in an order that alternates:

- ``one``: as shipped, an enqueue wakes one waiting worker per job, the one that began waiting
  last (migrations 0018 and 0024);
- ``oldest``: the same, but the worker that waited longest is woken (migration 0018's order);
- ``all``: the workers never register as waiting, so each enqueue finds no waiter and wakes
  every worker (``BENCH_WAKE_ALL=1``, ``benchmarks/wakeups_app``): migration 0002's behaviour;
- ``alone``: the producers with no worker running, the rate this machine allows them;
- ``raw``: producers with no worker that insert one row per transaction straight into the raw
  loop's table with psycopg (``benchmarks/rawloop.py``, ``INSERT_ONE``: no Django, no trigger),
  paced alike: what this machine allows a commit per job at all.

For each: the rate the producers reached (jobs enqueued over the time they took), and that
rate as a share of the rate asked and of ``raw``'s in the same repeat; the workers' turn
statements per job, the share of them that claimed no job and
wrote no outcome (empty: a wake-up or a poll for nothing), the share that claimed no job (the
turn that writes a job's outcome and finds nothing more counts here), the workers' CPU time per
job (from ``/proc``, while the producers run and the jobs drain), and each job's wait from
``created_at`` to ``started_at``, p50 and p95, and from the end of its enqueue's commit (as
its producer saw it) to ``started_at``: the wake-up's own part of the wait. The statements
are counted in the workers (``benchmarks/wakeups_app``).

Then what the trigger costs an enqueue (``--enqueue-jobs``, 0 skips it): one connection
enqueueing one job at a time, in alternating chunks, with migration 0002's trigger, with 0018's
and no worker registered, and with 0018's and four workers registered, none waiting (an
enqueue then notifies the one woken last: a queue whose workers are all busy); the time per
``Job.enqueue``. Then how soon ``Job.wait`` returns after its job ended (``--waits``, 0 skips
it): one idle worker, jobs due two seconds after their enqueue, each waited for in turn,
first woken by the process's finish listener (``notified``, once the worker's heartbeat has
seen it), then by reading the row at growing intervals (``read``, the listener stopped, as on
MariaDB or behind a transaction pooler); from the job's ``finished_at`` to the wait's
return, by the database's clock, p50 and p95, and ``read`` / ``notified``. Writes the
figures as JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_django_jobs_wakeups")

import psycopg  # noqa: E402

from benchmarks.throughput import DB_NAME, bench_database, dsn, reset, write_json  # noqa: E402

SETUPS = ("one", "oldest", "all", "alone", "raw")
WOKEN = ("one", "oldest", "all")  # the set-ups with workers


def produce(rate: float, seconds: float, raw: bool = False) -> None:
    """A producer process: enqueue at ``rate`` jobs/s for ``seconds``; print what it reached.
    ``raw``: psycopg's INSERT of one row into the raw loop's table instead of ``Job.enqueue``."""
    if raw:
        from benchmarks import rawloop

        conn = psycopg.connect(dsn(DB_NAME), autocommit=True)

        def enqueue(n: int) -> int:
            row = conn.execute(rawloop.INSERT_ONE, rawloop.job_row(n)).fetchone()
            return row[0] if row else 0
    else:
        os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
        import django

        django.setup()
        from django_jobs.models import Job

        def enqueue(n: int) -> int:
            return Job.enqueue("bench.noop", {"n": n}).pk

    count = int(rate * seconds)
    enqueue(-1)  # connect and prepare outside the timed window
    commits = []  # (id, when its commit returned, epoch seconds)
    start = time.perf_counter()
    for n in range(count):
        ahead = start + n / rate - time.perf_counter()
        if ahead > 0:
            time.sleep(ahead)
        commits.append((enqueue(n), time.time()))
    spent = time.perf_counter() - start
    print(json.dumps({"jobs": count, "seconds": spent, "commits": commits}))


def run_setup(name: str, args: argparse.Namespace, control: psycopg.Connection) -> dict:
    reset(control)
    control.execute("DELETE FROM django_jobs_waiter")
    counts = Path(tempfile.mkdtemp(prefix="wakeups-"))
    env = {**os.environ, "BENCH_COUNTS_DIR": str(counts),
           "BENCH_WAKE_ALL": "1" if name == "all" else "0"}
    live = importlib.import_module("django_jobs.migrations.0024_live_waiters")
    control.execute(live.wake(live.LIVE, live.OLDEST if name == "oldest" else live.NEWEST))
    logs = ROOT / "benchmarks" / "results"
    workers = [subprocess.Popen(
        [sys.executable, "-m", "django", "runworker", "--settings=benchmarks.settings_wakeups",
         "--worker-id", f"{name}-{i}"],
        cwd=ROOT, env=env, stdout=open(logs / f"wakeups-{name}-{i}.log", "w"),
        stderr=subprocess.STDOUT) for i in range(args.workers if name in WOKEN else 0)]
    try:
        deadline = time.monotonic() + 60
        while control.execute("SELECT count(*) FROM django_jobs_worker").fetchone()[0] \
                < len(workers):
            if time.monotonic() > deadline:
                raise RuntimeError("the workers did not start; see benchmarks/results")
            time.sleep(0.05)
        time.sleep(4.0)  # the listeners' test notifications (PROBE_SECONDS) are settled
        if name in ("one", "oldest"):
            waiting = control.execute(
                "SELECT count(*) FROM django_jobs_waiter WHERE waiting IS NOT NULL").fetchone()[0]
            assert waiting == args.workers, f"{waiting} of {args.workers} workers wait"
        load = loadavg()
        cpu_before = sum(cpu_seconds(worker.pid) for worker in workers)
        producers = [subprocess.Popen(
            [sys.executable, __file__, "--produce", str(args.rate / args.producers),
             "--seconds", str(args.seconds), *(["--raw"] if name == "raw" else [])],
            cwd=ROOT, stdout=subprocess.PIPE, text=True,
        ) for _ in range(args.producers)]
        made = [json.loads(p.communicate()[0]) for p in producers]
        total = sum(m["jobs"] for m in made) + args.producers
        deadline = time.monotonic() + 120
        while workers and control.execute(
                "SELECT count(*) FROM django_jobs_job WHERE status = 'completed'").fetchone()[0] \
                < total:
            if time.monotonic() > deadline:
                raise RuntimeError("the jobs were not all run")
            time.sleep(0.1)
        cpu = sum(cpu_seconds(worker.pid) for worker in workers) - cpu_before
    finally:
        for worker in workers:
            worker.terminate()
        for worker in workers:
            worker.wait(timeout=60)
        control.execute(live.wake(live.LIVE, live.NEWEST))
    turns = {"statements": 0, "no_job": 0, "empty": 0, "jobs": 0, "told_all": 0}
    for path in counts.glob("*.json"):
        for key, value in json.loads(path.read_text()).items():
            turns[key] += value
    shutil.rmtree(counts)
    rate = sum(m["jobs"] / m["seconds"] for m in made)
    if not workers:
        return {"producers_rate": rate, "reached": rate / args.rate, "loadavg": load}
    waits, after_commit = [], []
    committed = {pk: at for m in made for pk, at in m["commits"]}
    for pk, wait, started in control.execute(
            "SELECT id, extract(epoch FROM started_at - created_at) * 1000, "
            "extract(epoch FROM started_at) FROM django_jobs_job"):
        waits.append(float(wait))
        if pk in committed:
            after_commit.append((float(started) - committed[pk]) * 1000)
    waits.sort()
    after_commit.sort()
    return {
        "producers_rate": rate, "reached": rate / args.rate,
        "worker_cpu_us_per_job": cpu / total * 1e6,
        "statements_per_job": turns["statements"] / turns["jobs"],
        "empty_share": turns["empty"] / turns["statements"],
        "no_job_share": turns["no_job"] / turns["statements"],
        "wait_p50_ms": percentile(waits, 0.5), "wait_p95_ms": percentile(waits, 0.95),
        "after_commit_p50_ms": percentile(after_commit, 0.5),
        "after_commit_p95_ms": percentile(after_commit, 0.95),
        "turns": turns, "loadavg": load,
    }


def enqueue_cost(control: psycopg.Connection, count: int, chunk: int = 250) -> dict:
    """Microseconds per ``Job.enqueue`` under each trigger (see the module's docstring)."""
    from django_jobs.models import Job

    wakeups = importlib.import_module("django_jobs.migrations.0018_wakeups")
    variants = {
        "every worker (0002)": (wakeups.EVERY_WORKER, 0),
        "one per job, no worker": (wakeups.TRIGGERS, 0),
        "one per job, 4 busy workers": (wakeups.TRIGGERS, 4),
    }
    reset(control)
    # Live sessions that do not listen: the trigger takes only the rows of live sessions
    # (migration 0024), and a notification to these reaches nobody.
    sessions = [psycopg.connect(dsn(DB_NAME), autocommit=True) for _ in range(4)]
    pids = [s.execute("SELECT pg_backend_pid()").fetchone()[0] for s in sessions]
    spent = dict.fromkeys(variants, 0.0)
    done = dict.fromkeys(variants, 0)
    Job.enqueue("bench.noop", {})  # connect and prepare outside the timed chunks
    for index in range(0, count, chunk):
        names = list(variants) if (index // chunk) % 2 == 0 else list(variants)[::-1]
        for name in names:
            triggers, busy = variants[name]
            control.execute(triggers)
            control.execute("DELETE FROM django_jobs_waiter")
            for pid in pids[:busy]:
                control.execute("INSERT INTO django_jobs_waiter (pid, woken) "
                                "VALUES (%s, clock_timestamp())", (pid,))
            began = time.perf_counter()
            for _ in range(chunk):
                Job.enqueue("bench.noop", {})
            spent[name] += time.perf_counter() - began
            done[name] += chunk
    control.execute(wakeups.TRIGGERS)
    control.execute("DELETE FROM django_jobs_waiter")
    for session in sessions:
        session.close()
    return {name: spent[name] / done[name] * 1e6 for name in variants}


HEARTBEAT_SECONDS = 5.0  # the default: when a worker first sees a wait listener


def result_waits(count: int) -> dict:
    """Milliseconds from a job's end to its ``Job.wait``'s return (see the module's docstring)."""
    from django.db import connection

    from django_jobs.core.contract import engine
    from django_jobs.models import Job

    wakeups = engine("default").wakeups()
    worker = subprocess.Popen(
        [sys.executable, "-m", "django", "runworker", "--settings=benchmarks.settings"],
        cwd=ROOT, stdout=open(ROOT / "benchmarks" / "results" / "wakeups-waits.log", "w"),
        stderr=subprocess.STDOUT)
    after: dict[str, list[float]] = {"notified": [], "read": []}
    try:
        Job.enqueue("bench.noop", {}).wait(timeout=60)  # the worker and the listener are up
        time.sleep(HEARTBEAT_SECONDS + 1)  # the worker's heartbeat has seen the listener
        for index in range(2 * count):
            mode = "notified" if index < count else "read"
            if index == count:  # read: no listener, as where none is possible
                wakeups.gave_up = True
                wakeups.stop()
            job = Job.enqueue("bench.noop", {}, delay=2.0)
            job.wait(timeout=60)
            with connection.cursor() as cursor:
                cursor.execute("SELECT extract(epoch FROM clock_timestamp() - finished_at) "
                               "* 1000 FROM django_jobs_job WHERE id = %s", [job.pk])
                after[mode].append(float(cursor.fetchone()[0]))
    finally:
        wakeups.gave_up = False
        wakeups.stop()
        worker.terminate()
        worker.wait(timeout=60)
    for values in after.values():
        values.sort()
    return {mode: {"p50_ms": percentile(values, 0.5), "p95_ms": percentile(values, 0.95)}
            for mode, values in after.items()}


def cpu_seconds(pid: int) -> float:
    """A process's CPU time so far, user and system, from ``/proc``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(values: list[float], share: float) -> float:
    return values[min(len(values) - 1, round(share * (len(values) - 1)))]


def loadavg() -> str:
    with open("/proc/loadavg") as load:
        return " ".join(load.read().split()[:3])


COLUMNS = (("producers_rate", "producers' jobs/s", "{:.0f}"),
           ("reached", "of the rate asked", "{:.0%}"),
           ("statements_per_job", "statements/job", "{:.2f}"),
           ("worker_cpu_us_per_job", "worker CPU us/job", "{:.0f}"),
           ("empty_share", "empty", "{:.1%}"), ("no_job_share", "no job", "{:.1%}"),
           ("wait_p50_ms", "wait p50 ms", "{:.1f}"), ("wait_p95_ms", "wait p95 ms", "{:.1f}"),
           ("after_commit_p50_ms", "after commit p50 ms", "{:.1f}"),
           ("after_commit_p95_ms", "p95 ms", "{:.1f}"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="jobs/s, all producers")
    parser.add_argument("--seconds", type=float, default=10.0, help="how long they enqueue")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--enqueue-jobs", type=int, default=4000,
                        help="jobs per trigger in the enqueue-cost measure (0: none)")
    parser.add_argument("--waits", type=int, default=10,
                        help="jobs waited for in each way in the Job.wait measure (0: none)")
    parser.add_argument("--produce", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce is not None:
        produce(args.produce, args.seconds, args.raw)
        return
    (ROOT / "benchmarks" / "results").mkdir(parents=True, exist_ok=True)
    with bench_database():
        run_all(args)


def run_all(args: argparse.Namespace) -> None:
    runs: list[dict] = []
    with psycopg.connect(dsn(DB_NAME), autocommit=True) as control:
        for index in range(args.repeat):
            order = SETUPS if index % 2 == 0 else SETUPS[::-1]
            run = {name: run_setup(name, args, control) for name in order}
            runs.append(run)
            print(f"repeat {index + 1}: " + "; ".join(
                f"{name} " + ", ".join(fmt.format(run[name][key]) + f" {label}"
                                       for key, label, fmt in COLUMNS[:5] if key in run[name])
                for name in SETUPS), flush=True)
    print(f"\n{args.rate:.0f} jobs/s asked, one at a time, by {args.producers} producers for "
          f"{args.seconds:.0f} s; {args.workers} idle runworker; median of {args.repeat} (range)")
    summary: dict = {}
    for name in SETUPS:
        summary[name] = {key: spread([run[name][key] for run in runs])
                         for key, _, _ in COLUMNS if key in runs[0][name]}
        print(f"{name:6} " + "  ".join(
            f"{label} {fmt.format(summary[name][key][0])} ({fmt.format(summary[name][key][1])}"
            f"-{fmt.format(summary[name][key][2])})" for key, label, fmt in COLUMNS
            if key in summary[name]))
    ratios = {}
    for top, bottom, key in (("one", "all", "producers_rate"), ("one", "alone", "producers_rate"),
                             ("all", "alone", "producers_rate"), ("one", "raw", "producers_rate"),
                             ("all", "raw", "producers_rate"), ("alone", "raw", "producers_rate"),
                             ("one", "all", "worker_cpu_us_per_job"),
                             ("one", "all", "wait_p50_ms"), ("one", "all", "wait_p95_ms"),
                             ("one", "oldest", "wait_p50_ms"), ("one", "oldest", "wait_p95_ms"),
                             ("one", "oldest", "after_commit_p50_ms"),
                             ("one", "all", "after_commit_p50_ms")):
        ratios[f"{key} {top}/{bottom}"] = ratio = spread(
            [run[top][key] / run[bottom][key] for run in runs])
        print(f"{key}, {top} / {bottom}: {ratio[0]:.2f} ({ratio[1]:.2f}-{ratio[2]:.2f})")
    costs = {}
    if args.enqueue_jobs:
        with psycopg.connect(dsn(DB_NAME), autocommit=True) as control:
            costs = enqueue_cost(control, args.enqueue_jobs)
        base = costs["every worker (0002)"]
        print(f"\nJob.enqueue, one connection, {args.enqueue_jobs} jobs per trigger:")
        for name, us in costs.items():
            print(f"{name:28} {us:7.0f} us per job   {us / base:.2f}")
    waits = result_waits(args.waits) if args.waits else {}
    if waits:
        print(f"\nJob.wait, {args.waits} jobs each, from the job's end to the wait's return:")
        for mode, figures in waits.items():
            print(f"{mode:9} p50 {figures['p50_ms']:6.1f} ms  p95 {figures['p95_ms']:6.1f} ms")
        print(f"read / notified, p50: {waits['read']['p50_ms'] / waits['notified']['p50_ms']:.1f}")
    path = write_json("wakeups", args, summary=summary, runs=runs, ratios=ratios,
                      enqueue_us=costs, waits=waits)
    print(f"written to {path.relative_to(ROOT)}")


def spread(values: list[float]) -> list[float]:
    """Median, lowest and highest."""
    return [statistics.median(values), min(values), max(values)]


if __name__ == "__main__":
    main()
