"""Claim cost with an empty history versus one million finished rows, on PostgreSQL.

    .venv/bin/python benchmarks/claim_scaling.py [--finished 1000000] [--ready 2000]

Measures, in one run on one database, the mean time of a claim-and-finish cycle (claim 10,
finish 10) with no finished rows (the baseline), then again after inserting ``--finished``
completed and dead rows, and prints the ratio. The partial index django_jobs_ready_idx
holds only pending and failed rows, so the ratio should stay near 1. The finished rows are
inserted on the open shelf (the column's default), so on PostgreSQL they sit in the claim's own
partition, ``django_jobs_job_open``, as on a plain table: the case the partial index alone
must carry (a worker's finish would move them to a day partition instead).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DB = "bench_claim_scaling"

from benchmarks.scratch import claim_and_finish, configure, recreate_database  # noqa: E402


def cycles(ready: int) -> tuple[list[float], list[float]]:
    """Enqueue ``ready`` jobs, then time claim(10) and finish until they are all done."""
    from django_jobs.models import Job

    Job.enqueue_many("bench.noop", [{}] * ready)
    claims, finishes = [], []
    while (took := claim_and_finish()) is not None:
        claims.append(took[0])
        finishes.append(took[1])
    return claims, finishes


def add_history(count: int) -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            """
            INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue, run_at,
                attempt, max_attempts, created_at, updated_at, finished_at, worker_id,
                cancel_requested, callback_url, has_dependents, crashes)
            SELECT 'j-h' || lpad(to_hex(g), 19, '0'), 'bench.noop', '{}',
                   CASE WHEN g %% 50 = 0 THEN 'dead' ELSE 'completed' END, 0, 'default',
                   now() - interval '1 day', 1, 3, now() - interval '1 day', now(), now(), 'old',
                   false, '', false, 0
            FROM generate_series(1, %s) AS g
            """,
            [count],
        )
        cursor.execute("ANALYZE django_jobs_job")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--finished", type=int, default=1_000_000)
    parser.add_argument("--ready", type=int, default=2000)
    args = parser.parse_args()
    recreate_database(DB)
    configure(DB, ["benchmarks.noop_app"])
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    empty = cycles(args.ready)
    start = time.perf_counter()
    add_history(args.finished)
    filled_in = time.perf_counter() - start
    full = cycles(args.ready)
    print(f"history rows inserted: {args.finished:,} in {filled_in:.1f} s")
    print(f"median over {len(empty[0])} cycles of 10 jobs; baseline: no finished rows")
    print(f"{'step':<10} {'baseline ms':>12} {'loaded ms':>12} {'ratio':>7}")
    for name, base_times, loaded_times in (("claim", empty[0], full[0]),
                                           ("finish", empty[1], full[1])):
        base, loaded = statistics.median(base_times), statistics.median(loaded_times)
        print(f"{name:<10} {base * 1000:>12.2f} {loaded * 1000:>12.2f} {loaded / base:>7.2f}")


if __name__ == "__main__":
    main()
