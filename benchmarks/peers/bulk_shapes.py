"""Two shapes of the raw bulk insert, back to back: a multi-row ``VALUES`` list (7 parameters a
row, ``benchmarks/rawloop.py``) against ``INSERT ... SELECT * FROM unnest(...)`` of one array
per column (7 parameters in all, the shape PGQueuer's bulk enqueue uses).

    benchmarks/peers/.venv/bin/python -m benchmarks.peers.bulk_shapes [--jobs 5000] [--repeat 5]

Creates and drops the database ``bench_peers_bulk``; prints the median rates and the median
ratio unnest / values.
"""

from __future__ import annotations

import argparse
import statistics
import time

import psycopg

from benchmarks import rawloop
from benchmarks.peers.systems import dsn

DB = "bench_peers_bulk"
UNNEST = (
    f"INSERT INTO {rawloop.TABLE} (public_id, type, payload, priority, queue, run_at, "
    "max_attempts) SELECT * FROM unnest(%s::varchar[], %s::varchar[], %s::jsonb[], "
    "%s::smallint[], %s::varchar[], %s::timestamptz[], %s::smallint[]) RETURNING id"
)


def enqueue_unnest(conn: psycopg.Connection, count: int) -> None:
    columns = zip(*(rawloop.job_row(n) for n in range(count)), strict=True)
    conn.execute(UNNEST, [list(column) for column in columns]).fetchall()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with psycopg.connect(dsn("postgres"), autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        admin.execute(f"CREATE DATABASE {DB}")
    try:
        rates: dict[str, list[float]] = {"values": [], "unnest": []}
        shapes = [("values", rawloop.enqueue_bulk), ("unnest", enqueue_unnest)]
        with psycopg.connect(dsn(DB), autocommit=True) as conn:
            conn.execute(rawloop.CREATE_TABLE)
            for index in range(args.repeat):
                for name, insert in shapes if index % 2 == 0 else shapes[::-1]:
                    conn.execute(f"TRUNCATE {rawloop.TABLE}")
                    conn.execute("CHECKPOINT")
                    start = time.perf_counter()
                    insert(conn, args.jobs)
                    rates[name].append(args.jobs / (time.perf_counter() - start))
    finally:
        with psycopg.connect(dsn("postgres"), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
    ratio = statistics.median(u / v for u, v in zip(rates["unnest"], rates["values"],
                                                    strict=True))
    print(f"{args.jobs} rows, median of {args.repeat}: VALUES "
          f"{statistics.median(rates['values']):,.0f}/s, unnest "
          f"{statistics.median(rates['unnest']):,.0f}/s, unnest/values {ratio:.2f}")


if __name__ == "__main__":
    main()
