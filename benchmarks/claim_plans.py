"""Claim and finish cost per job when the planner's statistics are wrong, against the analyzed case.

    .venv/bin/python benchmarks/claim_plans.py [--ready 100000] [--burst 1000000]
        [--finished 10000000] [--drain 20000] [--batches 10,100] [--queues a,b]
        [--db-prefix bench_claim_plans]

Builds the jobs table in five states, each in its own database, and for each claim size in
``--batches`` drains ``--drain`` no-op jobs from each through the worker's turn
(``JobManager.finish_and_claim``: finish the last batch and claim as many more, one
statement), by one connection, the states taking turns in a shuffled order in rounds of 500
jobs so that a busy minute on the machine falls on all of them alike:

- ``analyzed`` (the reference): ``--ready`` ready jobs, then ``ANALYZE``;
- ``never_analyzed``: ``--ready`` ready jobs, no statistics at all;
- ``burst_empty``: ``ANALYZE`` of the empty table, then ``--burst`` ready jobs;
- ``burst_small``: 200 finished jobs, ``ANALYZE`` (the statistics say the table is small and
  holds no ready job), then ``--burst`` ready jobs;
- ``history``: ``--finished`` finished jobs behind ``--ready`` ready ones, then ``ANALYZE``.

With ``--queues`` the jobs are spread over those queues in turn and the worker is given them
(``runworker --queues a,b``); without it they are all in ``default`` and the worker serves all
queues.

Autovacuum is off for the jobs table of each database so the state holds while it is measured.
Prints, per claim size and state, the median over rounds of the time per job and its ratio to
``analyzed``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.scratch import HOST, PORT, USER, recreate_database  # noqa: E402

ROUND = 500
STATES = ("analyzed", "never_analyzed", "burst_empty", "burst_small", "history")


PREFIX = ["bench_claim_plans"]  # the databases' names start with it (--db-prefix)


def database(state: str) -> str:
    return f"{PREFIX[0]}_{state}"


QUEUES = ["default"]  # the queues the jobs are spread over (--queues)


def add(conn: psycopg.Connection, count: int, status: str, prefix: str, age: str) -> None:
    """Insert ``count`` no-op jobs in ``status`` in one statement, spread over ``QUEUES``."""
    conn.execute(
        """INSERT INTO django_jobs_job (public_id, type, payload, status, priority, queue,
               run_at, attempt, max_attempts, crashes, created_at, updated_at, finished_at,
               worker_id, cancel_requested, callback_url, has_dependents)
           SELECT %s || lpad(to_hex(g), 19, '0'), 'bench.noop', '{}', %s, 0,
               (%s::text[])[g %% %s + 1], now() - %s::interval, 0, 3, 0, now(), now(),
               CASE WHEN %s = 'completed' THEN now() END, '', false, '', false
           FROM generate_series(1, %s) AS g""",
        [prefix, status, QUEUES, len(QUEUES), age, status, count],
    )


def build(state: str, args: argparse.Namespace) -> float:
    """Fill ``state``'s database; return the seconds it took."""
    start = time.perf_counter()
    with psycopg.connect(host=HOST, port=PORT, user=USER, dbname=database(state),
                         autocommit=True) as conn:
        # The job table is a partitioned parent on PostgreSQL: autovacuum is set per partition.
        for (part,) in conn.execute(
                "SELECT relid::regclass::text FROM pg_partition_tree('django_jobs_job') "
                "WHERE isleaf").fetchall() or [("django_jobs_job",)]:
            conn.execute(f"ALTER TABLE {part} SET (autovacuum_enabled = false)")
        if state == "analyzed":
            add(conn, args.ready, "pending", "j-r", "1 second")
            conn.execute("ANALYZE django_jobs_job")
        elif state == "never_analyzed":
            add(conn, args.ready, "pending", "j-r", "1 second")
        elif state == "burst_empty":
            conn.execute("ANALYZE django_jobs_job")
            add(conn, args.burst, "pending", "j-r", "1 second")
        elif state == "burst_small":
            add(conn, 200, "completed", "j-h", "1 hour")
            conn.execute("ANALYZE django_jobs_job")
            add(conn, args.burst, "pending", "j-r", "1 second")
        else:
            add(conn, args.finished, "completed", "j-h", "1 day")
            add(conn, args.ready, "pending", "j-r", "1 second")
            conn.execute("ANALYZE django_jobs_job")
        conn.execute("CHECKPOINT")
    return time.perf_counter() - start


def drain_round(alias: str, jobs: int, batch: int, queues: list[str] | None) -> float:
    """Seconds per job to finish and claim ``jobs`` jobs on ``alias``, as a worker's turns
    (a worker given ``queues``, or of all queues)."""
    from django.utils import timezone

    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.models import Job

    manager = Job.objects.db_manager(alias)
    claimed = manager.claim(worker_id="bench", limit=batch, lease_seconds=300, queues=queues)
    done = 0
    start = time.perf_counter()
    while claimed and done < jobs:
        now = timezone.now()
        outcomes = [AttemptOutcome(job=job, kind="completed", started_at=now, finished_at=now)
                    for job in claimed]
        done += len(claimed)
        _, claimed = manager.finish_and_claim(outcomes, worker_id="bench", limit=batch,
                                              lease_seconds=300, queues=queues)
    elapsed = time.perf_counter() - start
    if claimed:  # give the last batch back
        manager.filter(pk__in=[job.pk for job in claimed]).update(status="pending")
    return elapsed / max(done, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ready", type=int, default=100_000)
    parser.add_argument("--burst", type=int, default=1_000_000)
    parser.add_argument("--finished", type=int, default=10_000_000)
    parser.add_argument("--drain", type=int, default=20_000)
    parser.add_argument("--batches", default="10,100", help="claim sizes, comma-separated")
    parser.add_argument("--queues", default="",
                        help="the worker's queues, comma-separated (default: all queues)")
    parser.add_argument("--db-prefix", default=PREFIX[0],
                        help="start of the five databases' names (two runs at once need two)")
    args = parser.parse_args()
    PREFIX[0] = args.db_prefix
    queues = [name for name in args.queues.split(",") if name] or None
    if queues:
        QUEUES[:] = queues

    import django
    from django.conf import settings
    from django.core.management import call_command

    for state in STATES:
        recreate_database(database(state))
    settings.configure(
        DATABASES={alias: {"ENGINE": "django.db.backends.postgresql",
                           "NAME": database("analyzed" if alias == "default" else alias),
                           "USER": USER, "HOST": HOST, "PORT": PORT}
                   for alias in ("default", *STATES)},
        INSTALLED_APPS=["django.contrib.contenttypes", "django.contrib.auth", "django_jobs",
                        "benchmarks.noop_app"],
        USE_TZ=True, DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
    )
    django.setup()
    for state in STATES:
        call_command("migrate", database=state, verbosity=0)
        print(f"{state}: built in {build(state, args):.0f} s", flush=True)

    print(f"queues {', '.join(queues) if queues else 'all'}; "
          f"ready {args.ready:,}, burst {args.burst:,}, finished {args.finished:,}; "
          f"{args.drain:,} jobs drained per state and claim size, in rounds of {ROUND:,}")
    print(f"{'claim size':>10} {'state':<16} {'us per job':>11} {'ratio':>7}")
    for batch in [int(size) for size in args.batches.split(",")]:
        times: dict[str, list[float]] = {state: [] for state in STATES}
        for _ in range(max(args.drain // ROUND, 1)):
            for state in random.sample(STATES, len(STATES)):
                times[state].append(drain_round(state, ROUND, batch, queues))
        reference = statistics.median(times["analyzed"])
        for state in STATES:
            per_job = statistics.median(times[state])
            print(f"{batch:>10} {state:<16} {per_job * 1e6:>11.1f} {per_job / reference:>7.2f}",
                  flush=True)

if __name__ == "__main__":
    main()
