"""Throughput of django-jobs against a minimal psycopg loop, on the same PostgreSQL, same run.

    python benchmarks/throughput.py [--jobs 5000] [--repeat 3] [--quick]
    python benchmarks/throughput.py --cpu-bound [--jobs 400] [--repeat 5]

Measures enqueue one by one, bulk enqueue, and the drain of no-op jobs by 1 and by 4 worker
processes (real ``runworker --burst`` processes against ``benchmarks/rawloop.py`` workers), plus
the peak memory of a worker process. Prints each rate and the ratio ours / raw (the median over
the repeats of the ratio measured within each repeat), and writes the figures as JSON to
``benchmarks/results/``. See ``benchmarks/README.md`` for what each figure means.

``--cpu-bound`` drains CPU-bound jobs instead (``bench.cpu``: 10 ms of pure Python each) with
one worker process of 4 threads (``--processes 1 --concurrency 4``) and with two of 2 threads
(``--processes 2 --concurrency 2``), alternating which goes first, and prints each rate, their
ratio (the median of the ratios within each repeat), the load average around the run, and how
much faster two processes burning CPU end than one (2.0 on two idle cores): the ratio's
ceiling on this machine at this time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import rawloop  # noqa: E402
from benchmarks.drain import drain  # noqa: E402

DB_NAME = os.environ.setdefault("BENCH_DB_NAME", "bench_django_jobs")
CHUNK = 250  # jobs per alternating chunk of the one-by-one enqueue
TARGETS = {"enqueue_one": 0.6, "drain_4": 0.8}
LABELS = {
    "enqueue_one": "enqueue one by one (jobs/s)",
    "enqueue_bulk": "bulk enqueue (jobs/s)",
    "drain_1": "drain, 1 worker (jobs/s)",
    "drain_4": "drain, 4 workers (jobs/s)",
}
# Figures where lower is better: their ratio is ours / raw all the same.
LOWER = {
    "enqueue_one_client_us": "enqueue one: client CPU (us/job)",
    "enqueue_one_server_us": "enqueue one: server CPU (us/job)",
    "peak_rss": "peak RSS of a worker (MiB)",
}


def dsn(dbname: str) -> str:
    return (
        f"host={os.environ.get('PGHOST', '127.0.0.1')} port={os.environ.get('PGPORT', '5432')} "
        f"user={os.environ.get('PGUSER', 'postgres')} dbname={dbname}"
    )


def create_database() -> None:
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{DB_NAME}"')


def drop_database() -> None:
    with psycopg.connect(dsn("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{DB_NAME}" WITH (FORCE)')


def setup_django() -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    with psycopg.connect(dsn(DB_NAME), autocommit=True) as conn:
        conn.execute(rawloop.CREATE_TABLE)


def reset(control: psycopg.Connection) -> None:
    """Empty both queues and start from a checkpoint, so each timing starts alike."""
    control.execute(
        f"TRUNCATE django_jobs_job, django_jobs_jobattempt, django_jobs_worker, "
        f"{rawloop.TABLE} RESTART IDENTITY CASCADE"
    )
    control.execute("CHECKPOINT")


def time_one_by_one(count: int, raw: psycopg.Connection, ours_first: bool) -> dict[str, Any]:
    """Enqueue ``count`` jobs one by one on each side, in alternating chunks of CHUNK jobs.

    Each INSERT commits on its own, so this mostly measures commit latency, which swings
    widely on a shared machine; alternating chunks lets both sides meet the same swings. Each
    side's CPU per job is kept too, this process's (``client_us``) and its PostgreSQL
    backend's (``server_us``, read from /proc; None when the server is on another host): a
    loaded machine disturbs them far less than the rates, and they say which side of the
    connection a difference is on.
    """
    from django.db import connection

    from django_jobs.models import Job

    def ours(start: int, stop: int) -> None:
        for n in range(start, stop):
            Job.enqueue("bench.noop", {"n": n})

    def theirs(start: int, stop: int) -> None:
        rawloop.enqueue_one_by_one(raw, stop - start, first=start)

    connection.ensure_connection()
    backends = {"ours": connection.connection.info.backend_pid, "raw": raw.info.backend_pid}
    spent = {"ours": 0.0, "raw": 0.0}
    client = {"ours": 0.0, "raw": 0.0}
    server: dict[str, float | None] = {"ours": 0.0, "raw": 0.0}
    order = [("ours", ours), ("raw", theirs)]
    for start in range(0, count, CHUNK):
        stop = min(start + CHUNK, count)
        for side, run in order if ours_first else order[::-1]:
            backend_before = process_cpu(backends[side])
            cpu_before, began = time.process_time(), time.perf_counter()
            run(start, stop)
            spent[side] += time.perf_counter() - began
            client[side] += time.process_time() - cpu_before
            backend_after = process_cpu(backends[side])
            known = server[side]
            server[side] = None if known is None or backend_before is None or \
                backend_after is None else known + backend_after - backend_before
    result: dict[str, Any] = {side: count / seconds for side, seconds in spent.items()}
    for side in spent:
        used = server[side]
        result[f"{side}_cpu"] = {"client_us": 1e6 * client[side] / count,
                                 "server_us": None if used is None else 1e6 * used / count}
    return result


def process_cpu(pid: int) -> float | None:
    """User and system CPU seconds of process ``pid`` on this host, or None if it is not here."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def time_ours_bulk(count: int) -> float:
    from django_jobs.models import Job

    start = time.perf_counter()
    Job.enqueue_many("bench.noop", [{"n": n} for n in range(count)])
    return count / (time.perf_counter() - start)


def time_raw(func, conn: psycopg.Connection, count: int) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    func(conn, count)
    return count / (time.perf_counter() - start)


def one_repeat(args: argparse.Namespace, control: psycopg.Connection, raw: psycopg.Connection,
               index: int) -> dict[str, dict]:
    """Each measurement once, ours and raw back to back; who goes first alternates."""
    sides = ("ours", "raw") if index % 2 == 0 else ("raw", "ours")
    reset(control)
    result: dict[str, dict] = {
        "enqueue_one": time_one_by_one(args.enqueue_jobs, raw, ours_first=index % 2 == 0)
    }
    runs = {
        "enqueue_bulk": {"ours": lambda: time_ours_bulk(args.jobs),
                         "raw": lambda: time_raw(rawloop.enqueue_bulk, raw, args.jobs)},
    }
    for name, run in runs.items():
        result[name] = {}
        for side in sides:
            reset(control)
            result[name][side] = run[side]()
    for workers in () if args.enqueue_only else (1, 4):
        name = f"drain_{workers}"
        result[name] = {}
        for side in sides:
            reset(control)
            outcome = drain(side, workers, args, control, raw)
            result[name][side] = outcome["rate"]
            result[name][f"{side}_detail"] = outcome
    return result


CPU_SHAPES = {"threads": ["--processes", "1", "--concurrency", "4"],
              "processes": ["--processes", "2", "--concurrency", "2"]}


BURN = "import time\nend = time.process_time() + 0.5\nwhile time.process_time() < end: pass"


def parallel_capacity() -> float:
    """How much faster two processes each burning 0.5 s of CPU end than two in a row: 2.0 when
    the machine has two idle cores for them, 1.0 when other work leaves them one between them
    (the ceiling of the processes / threads ratio in this run)."""
    def burn(count: int) -> float:
        start = time.perf_counter()
        procs = [subprocess.Popen([sys.executable, "-c", BURN]) for _ in range(count)]
        for proc in procs:
            proc.wait()
        return time.perf_counter() - start
    return 2 * burn(1) / burn(2)


def cpu_bound(args: argparse.Namespace, control: psycopg.Connection,
              raw: psycopg.Connection) -> dict[str, Any]:
    """The CPU-bound drain by threads and by processes (see the module's docstring)."""
    with open("/proc/loadavg") as loadavg:
        load_before = loadavg.read().split()[0]
    capacity_before = parallel_capacity()
    repeats = []
    for index in range(args.repeat):
        order = list(CPU_SHAPES) if index % 2 == 0 else list(reversed(CPU_SHAPES))
        rates = {}
        for shape in order:
            reset(control)
            options = [*CPU_SHAPES[shape], "--prefetch", "0", "-v", "0"]
            waiters = int(CPU_SHAPES[shape][1])
            rates[shape] = drain("ours", 1, args, control, raw, options, job_type="bench.cpu",
                                 waiters=waiters)["rate"]
        rates["ratio"] = rates["processes"] / rates["threads"]
        repeats.append(rates)
        print(f"repeat {index + 1}/{args.repeat}: threads {rates['threads']:.1f} jobs/s, "
              f"processes {rates['processes']:.1f} jobs/s, ratio {rates['ratio']:.2f}",
              flush=True)
    with open("/proc/loadavg") as loadavg:
        load_after = loadavg.read().split()[0]
    capacity = (capacity_before + parallel_capacity()) / 2
    summary = {key: statistics.median(r[key] for r in repeats)
               for key in ("threads", "processes", "ratio")}
    print(f"\nCPU-bound drain of {args.jobs} x 10 ms jobs, median of {args.repeat}: "
          f"--processes 1 --concurrency 4 {summary['threads']:.1f} jobs/s, --processes 2 "
          f"--concurrency 2 {summary['processes']:.1f} jobs/s: {summary['ratio']:.2f}x "
          f"(load average {load_before} before, {load_after} after; {os.cpu_count()} CPUs; "
          f"two processes got {capacity:.2f}x the CPU of one, the ceiling of the ratio)")
    return {"summary": summary, "repeats": repeats, "load": [load_before, load_after],
            "parallel_capacity": capacity}


def summarise(repeats: list[dict[str, dict]]) -> dict[str, dict]:
    summary: dict[str, dict] = {}
    for name in LABELS:
        if name not in repeats[0]:
            continue
        ours = [r[name]["ours"] for r in repeats]
        raw = [r[name]["raw"] for r in repeats]
        summary[name] = {
            "ours": statistics.median(ours), "raw": statistics.median(raw),
            "ratio": statistics.median(o / r for o, r in zip(ours, raw, strict=True)),
            "target": TARGETS.get(name),
        }
    cpu = {side: [r["enqueue_one"][f"{side}_cpu"] for r in repeats] for side in ("ours", "raw")}
    for part in ("client_us", "server_us"):
        if any(c[part] is None for side in cpu for c in cpu[side]):
            continue
        ours_cpu, raw_cpu = ([c[part] for c in cpu[side]] for side in ("ours", "raw"))
        summary[f"enqueue_one_{part}"] = {
            "ours": statistics.median(ours_cpu), "raw": statistics.median(raw_cpu),
            "ratio": statistics.median(o / r for o, r in zip(ours_cpu, raw_cpu, strict=True)),
            "target": None,
        }
    if "drain_1" not in repeats[0]:
        return summary
    ours_rss = [r[f"drain_{w}"]["ours_detail"]["peak_rss_kib"] for r in repeats for w in (1, 4)]
    raw_rss = [r[f"drain_{w}"]["raw_detail"]["peak_rss_kib"] for r in repeats for w in (1, 4)]
    summary["peak_rss"] = {"ours": max(ours_rss) / 1024, "raw": max(raw_rss) / 1024,
                           "ratio": max(ours_rss) / max(raw_rss), "target": None}
    return summary


def print_table(summary: dict[str, dict], args: argparse.Namespace) -> None:
    print(f"\n{args.jobs} jobs (enqueue one by one: {args.enqueue_jobs}), k={args.k}, "
          f"--concurrency {args.concurrency}, median of {args.repeat} repeat(s)")
    print(f"{'measure':34} {'ours':>10} {'raw':>10} {'ours/raw':>9} {'target':>7}")
    for name, label in [*LABELS.items(), *LOWER.items()]:
        if name not in summary:
            continue
        row = summary[name]
        target = f">= {row['target']}" if row["target"] else ""
        if name in LOWER:
            target = "(lower)"
        print(f"{label:34} {row['ours']:10.1f} {row['raw']:10.1f} {row['ratio']:9.2f} "
              f"{target:>7}")


def print_columns(columns: list[tuple[str, int, str]], rows: list[list[Any]]) -> None:
    """Print a plain table: ``columns`` are (heading, width, number format); the first column
    is aligned left, the others right; a cell that is a string is printed as it is."""
    def cell(index: int, value: Any) -> str:
        _heading, width, spec = columns[index]
        align = "<" if index == 0 else ">"
        return format(value, f"{align}{width}" + ("" if isinstance(value, str) else spec))

    print(" ".join(cell(i, heading) for i, (heading, _w, _s) in enumerate(columns)))
    for row in rows:
        print(" ".join(cell(i, value) for i, value in enumerate(row)).rstrip())


def write_json(name: str, args: argparse.Namespace, **figures: Any) -> Path:
    """Write a run's figures to ``benchmarks/results/NAME-STAMP.json``, with what they were
    measured on: the commit, the machine's CPUs, PostgreSQL's, Python's and Django's versions,
    and the run's options."""
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT,
                            capture_output=True, text=True).stdout.strip()
    with psycopg.connect(dsn("postgres")) as conn:
        server = conn.execute("SHOW server_version").fetchone()[0]
    try:
        from django import get_version
    except ImportError:  # a harness without Django
        django_version = "absent"
    else:
        django_version = get_version()
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = out / f"{name}-{stamp}.json"
    path.write_text(json.dumps({
        "when": stamp, "commit": commit, "cpus": os.cpu_count(), "postgresql": server,
        "python": platform.python_version(), "django": django_version,
        "options": vars(args), **figures,
    }, indent=2, default=str))
    return path


@contextmanager
def bench_database(keep: bool = False) -> Iterator[None]:
    """The benchmark's database (``BENCH_DB_NAME``), new and migrated, with the raw loop's
    table; Django's connections closed and the database dropped on the way out, unless
    ``keep``."""
    create_database()
    try:
        setup_django()
        yield
    finally:
        from django.db import connections

        connections.close_all()
        if not keep:
            drop_database()


def size_options(parser: argparse.ArgumentParser) -> None:
    """The options of a run that enqueues and drains: here and in ``peers/run.py``."""
    parser.add_argument("--jobs", type=int, default=5000, help="jobs per bulk enqueue and drain")
    parser.add_argument("--enqueue-jobs", type=int, default=None,
                        help="jobs enqueued one by one (default: --jobs)")
    parser.add_argument("--repeat", type=int, default=3, help="repeats; medians are reported")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size_options(parser)
    parser.add_argument("--quick", action="store_true", help="1,000 jobs, one repeat")
    parser.add_argument("--k", type=int, default=10, help="jobs per claim of the raw workers")
    parser.add_argument("--concurrency", type=int, default=10,
                        help="runworker --concurrency of each of our workers")
    parser.add_argument("--enqueue-only", action="store_true",
                        help="measure the enqueues only, not the drains")
    parser.add_argument("--keep-db", action="store_true", help="leave the database behind")
    parser.add_argument("--cpu-bound", action="store_true",
                        help="CPU-bound jobs, by threads and by processes (default: 400 jobs, "
                        "5 repeats)")
    args = parser.parse_args()
    if args.cpu_bound and "--jobs" not in sys.argv:
        args.jobs = 400
    if args.cpu_bound and "--repeat" not in sys.argv:
        args.repeat = 5
    if args.quick:
        args.jobs, args.repeat = 1000, 1
    args.enqueue_jobs = args.enqueue_jobs or args.jobs
    if args.jobs < 1 or args.repeat < 1 or args.k < 1 or args.concurrency < 1:
        parser.error("--jobs, --repeat, --k and --concurrency must be at least 1")
    return args


def main() -> None:
    args = parse_args()
    with bench_database(keep=args.keep_db):
        with psycopg.connect(dsn(DB_NAME), autocommit=True) as control, \
                psycopg.connect(dsn(DB_NAME), autocommit=True) as raw:
            if args.cpu_bound:
                figures = cpu_bound(args, control, raw)
                path = write_json("throughput_cpu", args, **figures)
                print(f"written to {path.relative_to(ROOT)}")
                return
            repeats = []
            for index in range(args.repeat):
                repeats.append(one_repeat(args, control, raw, index))
                print(f"repeat {index + 1}/{args.repeat}: " + ", ".join(
                    f"{name} {r['ours']:.0f}/{r['raw']:.0f}" for name, r in repeats[-1].items()
                ), flush=True)
        summary = summarise(repeats)
        print_table(summary, args)
        path = write_json("throughput", args, summary=summary, repeats=repeats)
        print(f"\nwritten to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
