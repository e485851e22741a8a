"""A drain by workers given one queue against the same drain by workers given two, same run.

    python benchmarks/queue_count.py [--jobs 200000] [--repeat 1] [--workers 4]
                                     [--spread both|first] [--held]

Each drain is ``benchmarks/held_snapshot.py``'s (the table emptied, ``--jobs`` pending no-op
jobs copied by the server from one enqueued through the ORM, analyzed; ``--workers`` processes
of ``runworker --burst`` started behind a table lock; the clock stops at the last job's
``finished_at``), with the workers' queues the only difference:

- ``one``: every job in queue ``a``, the workers ``--queues a``;
- ``two``: the workers ``--queues a,b``; with ``--spread both`` (the default) every other job
  is in ``b``, with ``--spread first`` every job is in ``a`` (``b`` stays empty).

``--held``: a REPEATABLE READ session holds its snapshot through each drain (as
``held_snapshot.py``'s ``held``). Each repeat runs both kinds, in alternating order. Prints each
kind's rate, the ready-index entries read per job (first -> last tenth) and the rate of ``two``
over ``one`` (the median over repeats of the ratio within each); writes the figures as JSON to
``benchmarks/results/``. ``BENCH_DB_NAME`` names the scratch database (default
``bench_queue_count``); it is dropped at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_queue_count")

from benchmarks import held_snapshot, throughput  # noqa: E402

KINDS = {"one": ["--queues", "a"], "two": ["--queues", "a,b"]}


def place(control: psycopg.Connection, spread: str, kind: str) -> None:
    """Put the jobs in their queues: ``a``, or every other one in ``b`` (``two``, ``both``)."""
    control.execute(f"UPDATE {held_snapshot.TABLE} SET queue = 'a'")
    if kind == "two" and spread == "both":
        control.execute(f"UPDATE {held_snapshot.TABLE} SET queue = 'b' WHERE id % 2 = 0")
    control.execute(f"VACUUM ANALYZE {held_snapshot.TABLE}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200_000, help="jobs per drain")
    parser.add_argument("--repeat", type=int, default=1, help="repeats; medians are reported")
    parser.add_argument("--workers", type=int, default=4, help="runworker processes")
    parser.add_argument("--spread", choices=("both", "first"), default="both",
                        help="two queues: jobs in both, or all in the first")
    parser.add_argument("--held", action="store_true",
                        help="a REPEATABLE READ snapshot held through each drain")
    args = parser.parse_args()
    if args.jobs < 10 or args.repeat < 1 or args.workers < 1:
        parser.error("--jobs must be at least 10, --repeat and --workers at least 1")
    args.from_front = False
    return args


def main() -> None:
    args = parse_args()
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    with (
        throughput.bench_database(),
        psycopg.connect(throughput.dsn(throughput.DB_NAME), autocommit=True) as control,
    ):
        for index in range(args.repeat):
            for kind in list(KINDS) if index % 2 == 0 else list(KINDS)[::-1]:
                runs[kind].append(held_snapshot.one_drain(
                    args, control, held=args.held, options=KINDS[kind],
                    prepare=lambda kind=kind: place(control, args.spread, kind)))
    print(f"{args.jobs:,} jobs, {args.workers} workers, jobs of two queues in "
          f"{args.spread}, snapshot {'held' if args.held else 'not held'}, "
          f"{args.repeat} repeat(s)")
    print(f"{'kind':<5} {'jobs/s':>8}  ready entries per job, first -> last tenth")
    summary: dict[str, Any] = {}
    for kind, drains in runs.items():
        rate = statistics.median(d["rate"] for d in drains)
        first, last = drains[0]["tenths"][0], drains[0]["tenths"][-1]
        summary[kind] = {"rate": rate, "drains": drains}
        print(f"{kind:<5} {rate:>8.0f}  {first['ready_entries_per_job']:.1f} -> "
              f"{last['ready_entries_per_job']:.1f}")
    ratio = statistics.median(
        t["rate"] / o["rate"] for t, o in zip(runs["two"], runs["one"], strict=True))
    summary["two_over_one"] = ratio
    print(f"two / one rate: {ratio:.2f}")
    print(f"written to {throughput.write_json('queue_count', args, summary=summary)}")


if __name__ == "__main__":
    main()
