"""What the claim's two fast paths for building Jobs gain: measured on and off, same run.

    python benchmarks/claim_build.py [--rounds 400] [--batch 10]

``engine/postgres/rows.py`` turns a claim's rows into Jobs by filling each instance's ``__dict__``
(``plainly_built``) and decodes each JSON column of the batch with one ``json.loads``
(``load_column``). Each is switched off in turn and the same claim timed, with the order
rotated every round:

- ``shipped``: both on (the baseline);
- ``per_job_json``: ``load_column`` decodes one value at a time with the field's own
  ``JSONField.from_db_value``;
- ``from_db``: ``Model.from_db`` builds every Job (which also decodes one value at a time).

Each round enqueues a batch per variant, then times ``Job.objects.claim`` (client and server,
prepared, in a transaction whose commit is not timed) and, apart, the building of the Jobs
from the rows alone. Prints the medians and their ratio to ``shipped``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_django_jobs_claim_build")

from benchmarks import throughput  # noqa: E402


@contextmanager
def variant(name: str):  # type: ignore[no-untyped-def]
    from django.db.models import JSONField

    from django_jobs.engine.postgres import rows as pgrows

    saved = pgrows.load_column, pgrows.plainly_built

    def per_job(jobs, column, to_python, connection):  # type: ignore[no-untyped-def]
        field = jobs[0]._meta.get_field(column) if jobs else None
        for job in jobs:
            job.__dict__[column] = JSONField.from_db_value(field, job.__dict__[column], None,
                                                           connection)

    if name == "per_job_json":
        pgrows.load_column = per_job
    elif name == "from_db":
        pgrows.plainly_built = lambda model: False
    try:
        yield
    finally:
        pgrows.load_column, pgrows.plainly_built = saved


def measure(rounds: int, batch: int) -> dict[str, dict[str, list[float]]]:
    from django.db import connection, transaction

    from django_jobs.engine.postgres import rows as pgrows
    from django_jobs.models import Job

    names = ["shipped", "per_job_json", "from_db"]
    times: dict[str, dict[str, list[float]]] = {n: {"claim": [], "build": []} for n in names}
    build = pgrows.claimed_jobs
    spent_building: list[float] = []

    def timed_build(*args):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        jobs = build(*args)
        spent_building.append(time.perf_counter() - start)
        return jobs

    pgrows_postgres = __import__("django_jobs.engine.postgres.engine", fromlist=["claimed_jobs"])
    pgrows_postgres.claimed_jobs = timed_build
    payload = {"order": 42, "customer": "c-1234", "items": [1, 2, 3], "note": "x" * 40}
    for n in range(rounds + 10):  # the first ten warm up (prepare) and are not counted
        order = names[n % 3:] + names[:n % 3]
        Job.objects.all().delete()
        for name in order:
            Job.enqueue_many("bench.noop", [payload] * batch)
            with variant(name), transaction.atomic():
                start = time.perf_counter()
                jobs = Job.objects.claim(worker_id="w", limit=batch, lease_seconds=30)
                spent = time.perf_counter() - start
            assert len(jobs) == batch and jobs[0].payload == payload, name
            if n >= 10:
                times[name]["claim"].append(spent)
                times[name]["build"].append(spent_building[-1])
    assert connection.vendor == "postgresql"
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=400)
    parser.add_argument("--batch", type=int, default=10)
    args = parser.parse_args()
    with throughput.bench_database():
        times = measure(args.rounds, args.batch)
        base = {part: statistics.median(times["shipped"][part]) for part in ("claim", "build")}
        print(f"{args.rounds} rounds, claims of {args.batch}: medians")
        print(f"{'variant':13} {'claim us':>9} {'ratio':>6} {'build us':>9} {'ratio':>6}")
        for name, parts in times.items():
            claim, built = (statistics.median(parts[p]) for p in ("claim", "build"))
            print(f"{name:13} {1e6 * claim:9.1f} {claim / base['claim']:6.2f} "
                  f"{1e6 * built:9.1f} {built / base['build']:6.2f}")


if __name__ == "__main__":
    main()
