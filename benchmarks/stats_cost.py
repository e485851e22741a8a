"""What counting finished jobs (``STATS``, ``engine/finish_counts.py``) costs the finish path.

    python benchmarks/stats_cost.py [--jobs 20000] [--repeat 3] [--quick] [--options "..."]

Each repeat creates a new database (``as_shipped.fresh_database``) and drains ``--jobs`` no-op
jobs with 4 ``runworker --burst`` processes twice: with the counts (``STATS = True``, the
default) and without (``STATS = False``, through ``BENCH_DJANGO_JOBS``), in alternating order
from repeat to repeat, the counts' table emptied before each drain. A no-op job is all finish
path: this is the worst case. Prints the median rate and workers' CPU per job of each, and
the median and range of on / off (each ratio taken within one repeat); writes them as JSON to
``benchmarks/results/``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import as_shipped, throughput  # noqa: E402
from benchmarks.drain import drain  # noqa: E402

SETUPS = {"stats_on": {"STATS": True}, "stats_off": {"STATS": False}}


def one_repeat(args: argparse.Namespace, index: int) -> dict[str, float]:
    as_shipped.fresh_database()
    figures: dict[str, float] = {}
    with psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as control, \
            psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as raw:
        names = list(SETUPS) if index % 2 == 0 else list(SETUPS)[::-1]
        for name in names:
            control.execute("TRUNCATE django_jobs_jobstat")
            throughput.reset(control)
            before = as_shipped.cpu_of_children()
            outcome = drain("ours", args.workers, args, control, raw,
                            options=shlex.split(args.options),
                            env={"BENCH_DJANGO_JOBS": json.dumps(SETUPS[name])})
            spent = as_shipped.cpu_of_children() - before - outcome["startup_cpu_seconds"]
            figures[name] = outcome["rate"]
            figures[f"cpu_us_{name}"] = spent / args.jobs * 1e6
            if name == "stats_on":
                counted = control.execute(
                    "SELECT coalesce(sum(count), 0) FROM django_jobs_jobstat WHERE span = 1"
                ).fetchone()
                assert counted is not None and counted[0] == args.jobs, counted
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--options", default=as_shipped.TUNED,
                        help=f"runworker's options (default: {as_shipped.TUNED!r})")
    args = as_shipped.parse_args(parser)
    with throughput.bench_database():
        repeats = [one_repeat(args, index) for index in range(args.repeat)]
    ratio = [r["stats_on"] / r["stats_off"] for r in repeats]
    cpu = [r["cpu_us_stats_on"] / r["cpu_us_stats_off"] for r in repeats]
    summary = {
        name: {"rate": statistics.median(r[name] for r in repeats),
               "cpu_us_per_job": statistics.median(r[f"cpu_us_{name}"] for r in repeats)}
        for name in SETUPS
    }
    summary["on_vs_off"] = {"rate": statistics.median(ratio), "rate_range": [min(ratio),
                            max(ratio)], "cpu": statistics.median(cpu),
                            "cpu_range": [min(cpu), max(cpu)]}
    print(f"\n{args.jobs} no-op jobs, {args.workers} workers, median of {args.repeat}; "
          f"options {args.options!r}; load {as_shipped.loadavg()}")
    for name in SETUPS:
        print(f"{name:10} {summary[name]['rate']:8.0f} jobs/s "
              f"{summary[name]['cpu_us_per_job']:7.1f} us CPU/job")
    on = summary["on_vs_off"]
    print(f"on / off: rate {on['rate']:.3f} ({on['rate_range'][0]:.3f}-{on['rate_range'][1]:.3f})"
          f", CPU per job {on['cpu']:.3f} ({on['cpu_range'][0]:.3f}-{on['cpu_range'][1]:.3f})")
    path = throughput.write_json("stats-cost", args, summary=summary, repeats=repeats,
                                 loadavg=as_shipped.loadavg())
    print(f"written to {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
