"""Steady state under sustained load: paced producers, four workers as shipped, a sample every 30 s.

    python benchmarks/sustained.py [--rate 1000] [--minutes 30] [--workers 4] [--producers 6]
                                   [--sample-seconds 30] [--retention 300]

Producer processes (``--producers``) enqueue no-op jobs one at a time (``Job.enqueue``, each its
own transaction), paced to ``--rate`` jobs/s between them, for ``--minutes``, while
``--workers`` ``runworker`` processes with no option run them. The workers keep every default
(autovacuum too: nothing is changed on the server or the tables) but one: ``RETENTION`` keeps
completed, canceled and dead jobs ``--retention`` seconds (default five minutes) instead of days,
so that within the run the workers' pruning (on by default, every ``PRUNE_INTERVAL``) deletes
what the producers add and the table can reach its plateau. ``--prune-interval`` overrides
``PRUNE_INTERVAL`` (default: as shipped).

Every ``--sample-seconds`` (database time), one sample: the backlog (pending jobs due now),
jobs enqueued and finished in the interval (the producers' reached rate and the workers'),
the wait from ``run_at`` to ``started_at`` of the jobs started in the interval (p50, p99, max),
the jobs and attempts tables' sizes (``pg_total_relation_size``, ``pg_relation_size``,
``pg_indexes_size``), their live and dead tuples and vacuum counts from
``pg_stat_user_tables``, and the machine's load average. Both tables are partitioned parents
on PostgreSQL (no storage or vacuum of their own): each figure is the sum over the parent's
partitions, and each partition's own figures are kept beside it (``partitions``); the line
printed per sample names the open partition's dead tuples and autovacuums, where the claims
and finishes leave theirs. The server is a new cluster with
PostgreSQL's default settings (``initdb`` on a port of its own, dropped at the end), unless
``--shared-server`` says to use the one PGHOST and PGPORT name as it is. Writes every sample
and the run's options and server settings as JSON to ``benchmarks/results/``
(``benchmarks/plot_sustained.py`` draws it). The database is ``BENCH_DB_NAME`` (default
``bench_django_jobs_sustained``).

``--statements`` loads ``pg_stat_statements`` into the new cluster (with planning tracked; it
changes nothing else) and adds the statements that took the server's time, with their calls,
plans and planning and running times, to the JSON, and their totals to the last line: where
the server's time goes under this load.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_django_jobs_sustained")

import psycopg  # noqa: E402

from benchmarks.throughput import DB_NAME, bench_database, dsn, write_json  # noqa: E402
from tests.chaos.cluster import Cluster, find_bindir  # noqa: E402

TABLES = ("django_jobs_job", "django_jobs_jobattempt")
# The server's autovacuum settings, recorded with the run (never changed by it).
SERVER_SETTINGS = (
    "autovacuum",
    "autovacuum_naptime",
    "autovacuum_vacuum_scale_factor",
    "autovacuum_vacuum_threshold",
    "autovacuum_vacuum_insert_scale_factor",
    "autovacuum_vacuum_cost_limit",
    "autovacuum_vacuum_cost_delay",
    "autovacuum_max_workers",
    "shared_buffers",
)

# Jobs started and finished in the interval [%(since)s, %(until)s): their wait from run_at to
# started_at (a claim's started_at is its transaction's now()) and how many finished. No index
# on started_at: a scan of the table, which retention keeps at rate x retention rows.
INTERVAL_SQL = """
SELECT count(*) FILTER (WHERE finished_at >= %(since)s AND finished_at < %(until)s),
       count(*) FILTER (WHERE started_at >= %(since)s AND started_at < %(until)s),
       percentile_disc(0.5) WITHIN GROUP (ORDER BY started_at - run_at)
           FILTER (WHERE started_at >= %(since)s AND started_at < %(until)s),
       percentile_disc(0.99) WITHIN GROUP (ORDER BY started_at - run_at)
           FILTER (WHERE started_at >= %(since)s AND started_at < %(until)s),
       max(started_at - run_at) FILTER (WHERE started_at >= %(since)s AND started_at < %(until)s)
FROM django_jobs_job
WHERE started_at >= %(since)s OR finished_at >= %(since)s
"""
# Per table with storage: on PostgreSQL the jobs and attempts tables are partitioned parents,
# which have no storage and no vacuum of their own, so each parent is read as its leaf
# partitions (``pg_partition_tree``); a plain table (not partitioned) is read as itself.
TABLE_SQL = """
WITH leaves AS (
    SELECT parent, tree.relid
    FROM unnest(%s::text[]) AS parent, pg_partition_tree(parent::regclass) AS tree
    WHERE tree.isleaf
    UNION ALL
    SELECT parent, parent::regclass
    FROM unnest(%s::text[]) AS parent
    WHERE NOT EXISTS (SELECT FROM pg_partition_tree(parent::regclass))
)
SELECT leaves.parent, s.relname, pg_total_relation_size(s.relid), pg_relation_size(s.relid),
       pg_indexes_size(s.relid), s.n_live_tup, s.n_dead_tup, s.autovacuum_count,
       s.autoanalyze_count, extract(epoch FROM s.last_autovacuum)
FROM leaves JOIN pg_stat_user_tables AS s ON s.relid = leaves.relid
ORDER BY leaves.parent, s.relname
"""
SUMMED = ("total_bytes", "heap_bytes", "index_bytes", "live_tuples", "dead_tuples",
          "autovacuums", "autoanalyzes")


def produce(rate: float, seconds: float) -> None:
    """A producer process: enqueue at ``rate`` jobs/s for ``seconds``, one job per transaction;
    print how many it enqueued and over how long. Behind its pace it enqueues without pausing
    until it has caught up; it stops at the end of ``seconds`` however many it reached."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.settings"
    import django

    django.setup()
    from django_jobs.models import Job

    Job.enqueue("bench.noop", {})  # connect and prepare outside the paced window
    start = time.perf_counter()
    end = start + seconds
    done = 0
    while True:
        now = time.perf_counter()
        if now >= end:
            break
        ahead = start + done / rate - now
        if ahead > 0:
            time.sleep(min(ahead, end - now))
            continue
        Job.enqueue("bench.noop", {"n": done})
        done += 1
    print(json.dumps({"jobs": done, "seconds": time.perf_counter() - start}))


def sample(control: psycopg.Connection, since: Any, last_id: int) -> tuple[dict[str, Any], Any]:
    """One sample of the interval from ``since`` (a database time) to the database's now, and
    that now (the next interval's start)."""
    (until,) = control.execute("SELECT statement_timestamp()").fetchone()
    seconds = (until - since).total_seconds()
    (backlog,) = control.execute(
        "SELECT count(*) FROM django_jobs_job WHERE status = 'pending' AND run_at <= now()"
    ).fetchone()
    (top_id,) = control.execute("SELECT coalesce(max(id), 0) FROM django_jobs_job").fetchone()
    finished, started, p50, p99, worst = control.execute(
        INTERVAL_SQL, {"since": since, "until": until}
    ).fetchone()
    tables: dict[str, dict[str, Any]] = {}
    for parent, name, total, heap, indexes, live, dead, vacuums, analyzes, last in control.execute(
        TABLE_SQL, [list(TABLES), list(TABLES)]
    ):
        part = {
            "total_bytes": total,
            "heap_bytes": heap,
            "index_bytes": indexes,
            "live_tuples": live,
            "dead_tuples": dead,
            "autovacuums": vacuums,
            "autoanalyzes": analyzes,
            "last_autovacuum": last,
        }
        table = tables.setdefault(
            parent, {**dict.fromkeys(SUMMED, 0), "last_autovacuum": None, "partitions": {}}
        )
        table["partitions"][name] = part
        for key in SUMMED:
            table[key] += part[key]
        if last is not None and (table["last_autovacuum"] is None
                                 or last > table["last_autovacuum"]):
            table["last_autovacuum"] = last
    with open("/proc/loadavg") as load:
        load1, load5, load15 = (float(x) for x in load.read().split()[:3])
    return {
        "at": until.timestamp(),
        "interval_seconds": seconds,
        "backlog": backlog,
        "enqueued_per_s": (top_id - last_id) / seconds,
        "finished_per_s": finished / seconds,
        "started": started,
        "wait_p50_ms": ms(p50),
        "wait_p99_ms": ms(p99),
        "wait_max_ms": ms(worst),
        "tables": tables,
        "loadavg": [load1, load5, load15],
        "top_id": top_id,
    }, until


def ms(interval: Any) -> float | None:
    return None if interval is None else interval.total_seconds() * 1000


def start_workers(args: argparse.Namespace, logs: list[Any]) -> list[subprocess.Popen]:
    """``runworker`` with no option; the settings add only the short retention (and the prune
    interval when ``--prune-interval`` says so), through ``BENCH_DJANGO_JOBS``."""
    site: dict[str, Any] = {
        "RETENTION": dict.fromkeys(("completed", "canceled", "dead"), args.retention)
    }
    if args.prune_interval is not None:
        site["PRUNE_INTERVAL"] = args.prune_interval
    env = {**os.environ, "BENCH_DJANGO_JOBS": json.dumps(site)}
    return [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "django",
                "runworker",
                "--settings=benchmarks.settings",
                "--worker-id",
                f"sustained-{i}",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        for i, log in enumerate(logs)
    ]


def wait_for_workers(control: psycopg.Connection, workers: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + 60
    while control.execute("SELECT count(*) FROM django_jobs_worker").fetchone()[0] < len(workers):
        if time.monotonic() > deadline or any(w.poll() is not None for w in workers):
            raise RuntimeError("the workers did not start; see benchmarks/results/sustained-*.log")
        time.sleep(0.1)


# The statements that took the server's time (``--statements``), most first.
STATEMENTS_SQL = """
SELECT calls, plans, total_exec_time, total_plan_time, rows,
       left(regexp_replace(query, '\\s+', ' ', 'g'), 160)
FROM pg_stat_statements
WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY total_exec_time + total_plan_time DESC
LIMIT 25
"""


def statements(control: psycopg.Connection) -> dict[str, Any]:
    """What ``pg_stat_statements`` counted for the run's database: totals and the top 25."""
    top = [dict(zip(("calls", "plans", "exec_ms", "plan_ms", "rows", "query"), row, strict=True))
           for row in control.execute(STATEMENTS_SQL)]
    calls, plans, exec_ms, plan_ms = control.execute(
        "SELECT sum(calls), sum(plans), sum(total_exec_time), sum(total_plan_time)"
        " FROM pg_stat_statements"
        " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
    ).fetchone()
    return {"calls": int(calls), "plans": int(plans), "exec_ms": float(exec_ms),
            "plan_ms": float(plan_ms), "top": top}


def run(args: argparse.Namespace) -> dict[str, Any]:
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    logs = [open(out / f"sustained-worker-{i}.log", "w") for i in range(args.workers)]
    seconds = args.minutes * 60
    samples: list[dict[str, Any]] = []
    with psycopg.connect(dsn(DB_NAME), autocommit=True) as control:
        server = {name: control.execute(f"SHOW {name}").fetchone()[0] for name in SERVER_SETTINGS}
        if args.statements:
            control.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
            control.execute("SELECT pg_stat_statements_reset()")
        workers = start_workers(args, logs)
        producers: list[subprocess.Popen] = []
        try:
            wait_for_workers(control, workers)
            (since,) = control.execute("SELECT statement_timestamp()").fetchone()
            last_id = 0
            producers = [
                subprocess.Popen(
                    [
                        sys.executable,
                        __file__,
                        "--produce",
                        str(args.rate / args.producers),
                        "--seconds",
                        str(seconds),
                    ],
                    cwd=ROOT,
                    stdout=subprocess.PIPE,
                    text=True,
                )
                for _ in range(args.producers)
            ]
            first = time.monotonic()
            tick = 0
            while True:
                # Samples on a fixed grid from the start; the last one when the producers end.
                tick += 1
                due = min(tick * args.sample_seconds, seconds)
                time.sleep(max(0.0, first + due - time.monotonic()))
                if any(w.poll() is not None for w in workers):
                    raise RuntimeError("a worker stopped; see benchmarks/results/sustained-*.log")
                figures, since = sample(control, since, last_id)
                last_id = figures["top_id"]
                figures["minute"] = due / 60
                samples.append(figures)
                print(line(figures), flush=True)
                if due >= seconds:
                    break
            made = [json.loads(p.communicate(timeout=120)[0]) for p in producers]
        finally:
            for process in [*producers, *workers]:
                if process.poll() is None:
                    process.terminate()
            for process in [*producers, *workers]:
                process.wait(timeout=60)
            for log in logs:
                log.close()
        counted = statements(control) if args.statements else None
    reached = sum(m["jobs"] / m["seconds"] for m in made)
    return {
        "samples": samples,
        "server_settings": server,
        "producers": made,
        "producers_rate": reached,
        "statements": counted,
    }


def line(s: dict[str, Any]) -> str:
    jobs = s["tables"].get("django_jobs_job", {})
    attempts = s["tables"].get("django_jobs_jobattempt", {})
    opened = jobs.get("partitions", {}).get("django_jobs_job_open", {})
    return (
        f"{s['minute']:5.1f} min  backlog {s['backlog']:6d}"
        f"  enqueued {s['enqueued_per_s']:5.0f}/s"
        f"  finished {s['finished_per_s']:5.0f}/s  wait p99 {fmt(s['wait_p99_ms'])} ms"
        f"  jobs {mib(jobs.get('total_bytes'))} MiB (heap {mib(jobs.get('heap_bytes'))},"
        f" idx {mib(jobs.get('index_bytes'))}) dead {jobs.get('dead_tuples')}"
        f" av {jobs.get('autovacuums')} (open: dead {opened.get('dead_tuples')}"
        f" av {opened.get('autovacuums')})  attempts {mib(attempts.get('total_bytes'))} MiB"
        f"  load {s['loadavg'][0]:.1f}"
    )


def fmt(value: float | None) -> str:
    return "   -" if value is None else f"{value:6.1f}"


def mib(value: int | None) -> str:
    return "-" if value is None else f"{value / 2**20:.1f}"


def own_server(statements: bool = False) -> Cluster:
    """A new PostgreSQL cluster (``initdb``) on a port of its own, every setting PostgreSQL's
    default (autovacuum on): a shared server's settings may differ (autovacuum turned off for
    tests) and must not be changed. PGHOST and PGPORT point the run and its workers at it."""
    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("initdb not found (PG_BINDIR); or run with --shared-server")
    cluster = Cluster(bindir)
    if statements:
        cluster.start(shared_preload_libraries="pg_stat_statements",
                      **{"pg_stat_statements.track_planning": "on"})
    else:
        cluster.start()
    os.environ["PGHOST"], os.environ["PGPORT"] = "127.0.0.1", str(cluster.port)
    return cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="jobs/s, all producers")
    parser.add_argument("--minutes", type=float, default=30.0, help="how long they enqueue")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--producers", type=int, default=6)
    parser.add_argument("--sample-seconds", type=float, default=30.0)
    parser.add_argument(
        "--retention",
        type=float,
        default=300.0,
        help="RETENTION of completed, canceled and dead jobs, seconds",
    )
    parser.add_argument(
        "--prune-interval",
        type=float,
        default=None,
        help="PRUNE_INTERVAL, seconds (default: as shipped)",
    )
    parser.add_argument(
        "--shared-server",
        action="store_true",
        help="the server PGHOST and PGPORT name, with its settings, instead of "
        "a new cluster with PostgreSQL's defaults",
    )
    parser.add_argument("--keep-db", action="store_true", help="leave the database behind")
    parser.add_argument("--statements", action="store_true",
                        help="count the server's statements (pg_stat_statements, new cluster)")
    parser.add_argument("--produce", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.produce is not None:
        produce(args.produce, args.seconds)
        return
    if min(args.rate, args.minutes, args.workers, args.producers, args.sample_seconds) <= 0:
        parser.error("--rate, --minutes, --workers, --producers, --sample-seconds must be > 0")
    if args.statements and args.shared_server:
        parser.error("--statements loads pg_stat_statements into a new cluster, not a shared one")
    cluster = None if args.shared_server else own_server(args.statements)
    try:
        with bench_database(keep=args.keep_db):
            figures = run(args)
        path = write_json("sustained", args, **figures)
    finally:
        if cluster is not None:
            cluster.destroy()
    print(
        f"\n{args.rate:.0f} jobs/s asked by {args.producers} producers, "
        f"{figures['producers_rate']:.0f} reached, {args.minutes:g} min, {args.workers} "
        f"runworker, retention {args.retention:g} s"
    )
    if figures["statements"]:
        counted = figures["statements"]
        share = counted["plan_ms"] / max(counted["plan_ms"] + counted["exec_ms"], 1e-9)
        print(f"server statements: {counted['calls']} calls, {counted['plans']} plans; "
              f"running {counted['exec_ms'] / 1000:.1f} s, planning "
              f"{counted['plan_ms'] / 1000:.1f} s ({share:.0%} of their time)")
    print(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
