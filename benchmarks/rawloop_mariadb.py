"""The MariaDB baseline: a minimal job queue written straight against mysqlclient, no framework.

A table with the columns of ``django_jobs_job`` that a claim reads or writes and an index that
serves the claim; one row per job. A worker claims ``k`` jobs at a time in a short transaction
(``SELECT ... FOR UPDATE SKIP LOCKED`` then one ``UPDATE``: MariaDB has no ``UPDATE ...
RETURNING``), calls a no-op function for each, then marks the batch done with one ``UPDATE`` in
autocommit.

Run as a worker process: ``python -m benchmarks.rawloop_mariadb DBNAME --k 10 --worker-id r1``.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
from typing import Any

import MySQLdb

TABLE = "raw_jobs"

CREATE_TABLE = f"""
CREATE TABLE {TABLE} (
    id bigint AUTO_INCREMENT PRIMARY KEY,
    public_id varchar(24) NOT NULL UNIQUE,
    type varchar(100) NOT NULL,
    payload json NOT NULL,
    status varchar(16) NOT NULL DEFAULT 'pending',
    priority smallint NOT NULL DEFAULT 0,
    queue varchar(100) NOT NULL DEFAULT 'default',
    run_at datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    attempt integer NOT NULL DEFAULT 0,
    created_at datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    updated_at datetime(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    started_at datetime(6) NULL,
    finished_at datetime(6) NULL,
    worker_id varchar(100) NOT NULL DEFAULT '',
    INDEX {TABLE}_ready_idx (status, priority DESC, run_at, id)
) CHARACTER SET utf8mb4
"""

INSERT = f"INSERT INTO {TABLE} (public_id, type, payload) VALUES (%s, %s, %s)"

PICK = f"""
SELECT id, type, payload FROM {TABLE}
WHERE status = 'pending' AND run_at <= UTC_TIMESTAMP(6)
ORDER BY priority DESC, run_at, id
LIMIT %s FOR UPDATE SKIP LOCKED
"""


def connect(dbname: str) -> Any:
    return MySQLdb.connect(host=os.environ.get("MARIADB_HOST", "127.0.0.1"),
                           port=int(os.environ.get("MARIADB_PORT", "3306")),
                           user=os.environ.get("MARIADB_USER", "root"), database=dbname,
                           charset="utf8mb4", autocommit=True)


def job_row(n: int) -> tuple[str, str, str]:
    return ("j-" + secrets.token_hex(10), "bench.noop", json.dumps({"n": n}))


def enqueue_one_by_one(conn: Any, count: int, first: int = 0) -> None:
    """One INSERT per job, each its own transaction (the connection is in autocommit)."""
    with conn.cursor() as cur:
        for n in range(first, first + count):
            cur.execute(INSERT, job_row(n))


def enqueue_bulk(conn: Any, count: int) -> None:
    """All jobs in multi-row INSERTs (mysqlclient's executemany folds them into one)."""
    with conn.cursor() as cur:
        cur.executemany(INSERT, [job_row(n) for n in range(count)])


def noop(payload: Any) -> None:
    return None


HANDLERS = {"bench.noop": noop}


def work(dbname: str, k: int, worker_id: str) -> int:
    """Claim k jobs at a time until none is ready; returns how many this worker ran."""
    done = 0
    conn = connect(dbname)
    conn.cursor().execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    with conn.cursor() as cur:
        while True:
            conn.begin()
            cur.execute(PICK, (k,))
            jobs = cur.fetchall()
            if not jobs:
                conn.commit()
                return done
            ids = [row[0] for row in jobs]
            marks = ", ".join(["%s"] * len(ids))
            cur.execute(f"UPDATE {TABLE} SET status = 'processing', attempt = attempt + 1, "
                        f"worker_id = %s, started_at = UTC_TIMESTAMP(6), "
                        f"updated_at = UTC_TIMESTAMP(6) WHERE id IN ({marks})",
                        [worker_id, *ids])
            conn.commit()
            for _id, type_, payload in jobs:
                HANDLERS[type_](json.loads(payload))
            cur.execute(f"UPDATE {TABLE} SET status = 'completed', "
                        f"finished_at = UTC_TIMESTAMP(6), updated_at = UTC_TIMESTAMP(6) "
                        f"WHERE id IN ({marks})", ids)
            done += len(jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dbname")
    parser.add_argument("--k", type=int, default=10, help="jobs claimed per transaction")
    parser.add_argument("--worker-id", default="raw")
    args = parser.parse_args()
    work(args.dbname, args.k, args.worker_id)


if __name__ == "__main__":
    main()
