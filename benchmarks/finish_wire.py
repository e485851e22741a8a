"""The finish statement's wire format: positional JSON arrays, named JSON objects, or arrays.

    python benchmarks/finish_wire.py [--rounds 300] [--batch 10]

A finish sends each outcome's ten values to PostgreSQL. Three forms of the same statement
(``engine/postgres/statements.py``'s ``FINISH``, its first CTE changed) are timed against each
other, in the same run, on the same connection, with the order rotated each round:

- ``positional``: one JSON array of arrays, read by position (``e->>0`` ... ``e->>9``): the
  baseline;
- ``named``: one JSON array of objects, ``jsonb_to_recordset(...) AS o(id bigint, ...)``;
- ``arrays``: one array parameter per column, ``unnest(%s::bigint[], ...) AS o(id, ...)``.

Each round enqueues and claims a batch per form, then times building the parameters and
running the statement (client and server, prepared as the worker's are), in a transaction
whose commit is not timed (its wait is the same for every form and swings on a shared
machine). Prints the median time per batch of each form and its ratio to the positional
form's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("BENCH_DB_NAME", "bench_django_jobs_wire")

from benchmarks import throughput  # noqa: E402

POSITIONAL = """v AS (
    SELECT (e->>0)::bigint AS id, (e->>1)::uuid AS token, e->>2 AS status,
        NULLIF(e->3, 'null') AS result, NULLIF(e->4, 'null') AS error,
        {epoch} + (e->>5)::bigint * {us} AS run_at,
        {epoch} + (e->>6)::bigint * {us} AS started_at,
        {epoch} + (e->>7)::bigint * {us} AS finished_at, (e->>8)::float8 / 1e9 AS cpu_time,
        (e->>9)::bigint AS peak_memory, {processing}::text AS held
    FROM jsonb_array_elements(%s::jsonb) AS e
)"""
ARRAYS = """v AS (
    SELECT o.id, o.token, o.status, o.result::jsonb AS result, o.error::jsonb AS error,
        {epoch} + o.run_at * {us} AS run_at, {epoch} + o.started * {us} AS started_at,
        {epoch} + o.finished * {us} AS finished_at, o.cpu_ns / 1e9 AS cpu_time,
        o.peak_memory, {processing}::text AS held
    FROM unnest(%s::bigint[], %s::uuid[], %s::text[], %s::text[], %s::text[], %s::bigint[],
                %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[])
        AS o(id, token, status, result, error, run_at, started, finished, cpu_ns, peak_memory)
)"""


def statements():  # type: ignore[no-untyped-def]
    from django_jobs.engine.postgres import statements as sql
    from django_jobs.models import Job

    named = sql.FINISH_CTES
    rest = named[named.index(", done AS ("):]
    return {
        "positional": sql.finish_sql(Job, f"WITH {POSITIONAL}{rest}\n{sql.RECORD}"),
        "named": sql.finish_sql(Job),
        "arrays": sql.finish_sql(Job, f"WITH {ARRAYS}{rest}\n{sql.RECORD}"),
    }


def values(outcomes, changes):  # type: ignore[no-untyped-def]
    """Each outcome's ten values, as ``postgres.finish_params`` gathers them."""
    from django_jobs.core.outcomes import micros

    for outcome, change in zip(outcomes, changes, strict=True):
        job, fields = outcome.job, change.fields
        run_at = fields.get("run_at")
        yield (job.id, str(job.lease_token), change.status, fields.get("result"),
               fields.get("error"), None if run_at is None else micros(run_at),
               outcome.started, outcome.finished, outcome.cpu_ns, outcome.peak_memory)


def params(form, outcomes, changes, now):  # type: ignore[no-untyped-def]
    from django_jobs.engine.postgres import engine as postgres

    ids = "{" + ",".join(str(o.job.id) for o in outcomes) + "}"
    named = postgres.finish_params(outcomes, changes, now)
    if form == "named":
        return named
    shelves = named[2:5]  # the prune days of a job completed, dead, canceled now
    rows = list(values(outcomes, changes))
    if form == "positional":
        return json.dumps(rows), now, *shelves, now, ids
    columns = [list(column) for column in zip(*rows, strict=True)]
    for i in (3, 4):  # result, error: JSON text or NULL
        columns[i] = [None if v is None else json.dumps(v) for v in columns[i]]
    return (*columns, now, *shelves, now, ids)


def measure(rounds: int, batch: int) -> dict[str, list[float]]:
    from django.db import connection, transaction
    from django.utils import timezone

    from django_jobs.core.outcomes import AttemptOutcome
    from django_jobs.engine.postgres.cursor import run
    from django_jobs.engine.writes import transition_of
    from django_jobs.models import Job

    texts = statements()
    forms = list(texts)
    times: dict[str, list[float]] = {form: [] for form in forms}
    for n in range(rounds + 10):  # the first ten warm up (prepare) and are not counted
        order = forms[n % 3:] + forms[:n % 3]
        Job.objects.all().delete()
        for form in order:
            Job.enqueue_many("bench.noop", [{"n": i, "s": "x" * 40} for i in range(batch)])
            jobs = Job.objects.claim(worker_id="w", limit=batch, lease_seconds=30)
            now = timezone.now()
            outcomes = [AttemptOutcome(job=job, kind="completed", started_at=now,
                                       finished_at=now, result={"ok": i}, cpu_time=0.001)
                        for i, job in enumerate(jobs)]
            changes = [transition_of(o, now) for o in outcomes]
            with transaction.atomic():  # the commit's wait, the same for all, left out
                start = time.perf_counter()
                rows = run(connection, texts[form], params(form, outcomes, changes, now))
                spent = time.perf_counter() - start
            assert len(rows) == batch, (form, len(rows))
            if n >= 10:
                times[form].append(spent)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=300)
    parser.add_argument("--batch", type=int, default=10)
    args = parser.parse_args()
    with throughput.bench_database():
        times = measure(args.rounds, args.batch)
        base = statistics.median(times["positional"])
        print(f"{args.rounds} rounds, batches of {args.batch}: median per finish statement")
        for form, spent in times.items():
            median = statistics.median(spent)
            print(f"{form:11} {1e6 * median:8.1f} us   {median / base:5.2f}x positional")


if __name__ == "__main__":
    main()
