"""The drain as a new user gets it: ``runworker`` with no options, against the raw loop.

    python benchmarks/as_shipped.py [--jobs 20000] [--repeat 3] [--quick]

Each repeat creates a new database, migrates it, and turns autovacuum off on both job tables
(so that PostgreSQL cannot gather statistics on its own mid-run), then drains ``--jobs`` no-op
jobs with 4 worker processes (``--workers``) in each set-up:

- ``raw_k10``, ``raw_k50``: ``benchmarks/rawloop.py`` claiming 10 and 50 at a time (table
  analyzed, as in ``throughput.py``);
- ``shipped_never_analyzed``: ``runworker --burst`` and nothing else (default concurrency,
  default logging to stderr) on the new table, never analyzed: the first drain of the run;
- ``shipped``: the same once the table is analyzed;
- ``shipped_quiet``: ``-v 0``, analyzed (what the default logging costs: ``shipped`` against it);
- ``shipped_json``: the default logging through a site ``LOGGING`` with the JSON formatter;
- ``tuned``: the options ``docs/reference-runworker.md`` recommends for throughput (``--tuned``).

Prints, per set-up, the median rate and the median and range of ours / raw k=10 (each ratio
taken within one repeat), ours / raw k=50, ours / ``-v 0``, and our workers' CPU per job from
the start of the clock to their exit (``getrusage`` of the reaped workers less their CPU while
they waited at the start, read from /proc), which a loaded machine disturbs far less than a
rate; writes the figures as JSON to ``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import resource
import shlex
import statistics
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import rawloop, throughput  # noqa: E402
from benchmarks.drain import drain  # noqa: E402

TUNED = "--concurrency 4 -v 0 --prefetch 0.2"  # docs/reference-runworker.md, for throughput
TARGETS = {"shipped_never_analyzed": 1.0, "tuned": 1.5}


def fresh_database() -> None:
    """A new database, migrated, its job tables never analyzed and left alone by autovacuum."""
    from django.core.management import call_command
    from django.db import connections

    connections.close_all()
    throughput.create_database()
    call_command("migrate", verbosity=0)
    with psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as conn:
        conn.execute(rawloop.CREATE_TABLE)
        for table in ("django_jobs_job", "django_jobs_jobattempt", rawloop.TABLE):
            for (part,) in conn.execute(LEAVES, {"t": table}).fetchall():
                conn.execute(f"ALTER TABLE {part} SET (autovacuum_enabled = false)")


# A table's partitions that have storage, or the table itself if it is not partitioned: the
# job tables are partitioned parents on PostgreSQL, which take no storage parameters (each
# partition has its own autovacuum setting).
LEAVES = """
SELECT relid::regclass::text FROM pg_partition_tree(%(t)s::regclass) WHERE isleaf
UNION ALL
SELECT %(t)s::text WHERE NOT EXISTS (SELECT FROM pg_partition_tree(%(t)s::regclass))
"""


def one_repeat(args: argparse.Namespace, index: int) -> dict[str, float]:
    fresh_database()
    rates: dict[str, float] = {}
    cpu: dict[str, float] = {}  # our workers' CPU per job from the clock's start to exit (µs)
    with psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as control, \
            psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as raw:

        def ours(name: str, options: list[str], analyze: bool = True,
                 env: dict[str, str] | None = None) -> None:
            throughput.reset(control)
            before = cpu_of_children()
            outcome = drain("ours", args.workers, args, control, raw, options=options,
                            analyze=analyze, env=env)
            rates[name] = outcome["rate"]
            spent = cpu_of_children() - before - outcome["startup_cpu_seconds"]
            cpu[name] = spent / args.jobs * 1e6

        def theirs(k: int) -> None:
            throughput.reset(control)
            args.k = k
            rates[f"raw_k{k}"] = drain("raw", args.workers, args, control, raw)["rate"]

        ours("shipped_never_analyzed", [], analyze=False)  # first: the table is new
        steps = [
            lambda: theirs(10),
            lambda: ours("shipped", []),
            lambda: ours("shipped_quiet", ["-v", "0"]),
            lambda: ours("shipped_json", [], env={"BENCH_JSON_LOGS": "1"}),
            lambda: ours("tuned", shlex.split(args.tuned)),
            lambda: theirs(50),
        ]
        for step in steps if index % 2 == 0 else steps[::-1]:
            step()
    return {**rates, **{f"cpu_us_{name}": value for name, value in cpu.items()}}


def cpu_of_children() -> float:
    """User and system CPU seconds of the reaped child processes (the workers) so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def summarise(repeats: list[dict[str, float]]) -> dict[str, dict]:
    summary = {}
    for name in [name for name in repeats[0] if not name.startswith("cpu_us_")]:
        k10 = [r[name] / r["raw_k10"] for r in repeats]
        k50 = [r[name] / r["raw_k50"] for r in repeats]
        quiet = [r[name] / r["shipped_quiet"] for r in repeats]
        summary[name] = {
            "rate": statistics.median(r[name] for r in repeats),
            "vs_k10": statistics.median(k10), "vs_k10_range": [min(k10), max(k10)],
            "vs_k50": statistics.median(k50), "vs_quiet": statistics.median(quiet),
            "vs_quiet_range": [min(quiet), max(quiet)], "target_vs_k10": TARGETS.get(name),
        }
        if f"cpu_us_{name}" in repeats[0]:
            summary[name]["cpu_us_per_job"] = statistics.median(
                r[f"cpu_us_{name}"] for r in repeats)
            summary[name]["cpu_vs_quiet"] = statistics.median(
                r[f"cpu_us_{name}"] / r["cpu_us_shipped_quiet"] for r in repeats)
    return summary


def parse_args(parser: argparse.ArgumentParser) -> argparse.Namespace:
    """The options of a drain of ``runworker`` as shipped and tuned against the raw loop
    (here and in ``netem.py``)."""
    parser.add_argument("--jobs", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tuned", default=TUNED, help=f"our tuned options (default: {TUNED})")
    parser.add_argument("--quick", action="store_true", help="2,000 jobs, one repeat")
    args = parser.parse_args()
    if args.quick:
        args.jobs, args.repeat = 2000, 1
    args.k, args.concurrency = 10, 1
    return args


def main() -> None:
    args = parse_args(argparse.ArgumentParser(description=__doc__.splitlines()[0]))
    with throughput.bench_database():
        repeats = []
        for index in range(args.repeat):
            repeats.append(one_repeat(args, index))
            print(f"repeat {index + 1}/{args.repeat}: " + ", ".join(
                f"{name} {rate:.0f}" for name, rate in repeats[-1].items()
            if not name.startswith("cpu_us_")), flush=True)
        summary = summarise(repeats)
        print(f"\n{args.jobs} no-op jobs, {args.workers} workers, median of {args.repeat}; "
              f"tuned = {args.tuned!r}")
        throughput.print_columns(
            [("set-up", 24, ""), ("jobs/s", 9, ".0f"), ("/raw k10", 9, ".2f"),
             ("(range)", 13, ""), ("/raw k50", 9, ".2f"), ("/-v 0", 6, ".2f"),
             ("(range)", 11, ""), ("CPU us/job", 11, ".1f"), ("/-v 0", 6, ".3f")],
            [[name, row["rate"], row["vs_k10"], "{:.2f}-{:.2f}".format(*row["vs_k10_range"]),
              row["vs_k50"], row["vs_quiet"], "{:.2f}-{:.2f}".format(*row["vs_quiet_range"]),
              row.get("cpu_us_per_job", ""), row.get("cpu_vs_quiet", "")]
             for name, row in summary.items()])
        path = throughput.write_json("as-shipped", args, summary=summary, repeats=repeats,
                                     loadavg=loadavg())
        print(f"\nwritten to {path.relative_to(ROOT)}")


def loadavg() -> str:
    """The machine's load average over 1, 5 and 15 minutes, as /proc/loadavg gives it."""
    with open("/proc/loadavg") as load:
        return " ".join(load.read().split()[:3])


if __name__ == "__main__":
    main()
