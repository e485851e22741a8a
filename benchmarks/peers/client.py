"""The producer side of one system, run as its own process (each system its own settings):

    python -m benchmarks.peers.client SYSTEM enqueue N    # one by one, each its own commit
    python -m benchmarks.peers.client SYSTEM bulk N       # the system's bulk path
    python -m benchmarks.peers.client SYSTEM drain N      # fill N at once, time until all ran
    python -m benchmarks.peers.client SYSTEM wake S       # S probes, one at a time

Prints one JSON object. ``drain`` and ``wake`` expect the system's workers to be running.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any

import psycopg

from benchmarks.peers.systems import SYSTEMS, db_name, dsn

POLL_SECONDS = 0.005
WAIT_LIMIT_SECONDS = 900


class Producer:
    """Enqueues no-op jobs into one system through that system's own API."""

    def __init__(self, system: str) -> None:
        self.system = system
        self.loop = asyncio.new_event_loop()
        if system in ("ours", "tasksdb", "q2"):
            os.environ["DJANGO_SETTINGS_MODULE"] = "benchmarks.peers.settings"
            import django

            django.setup()
        if system == "raw":
            self.conn = psycopg.connect(dsn(db_name(system)), autocommit=True)
        if system == "procrastinate":
            from benchmarks.peers.proc_app import app

            # Opened before any defer: procrastinate then defers through its sync connector.
            self.app = app.open()
        if system == "pgqueuer":
            import asyncpg
            from pgqueuer.db import AsyncpgDriver
            from pgqueuer.queries import Queries

            aconn = self.loop.run_until_complete(asyncpg.connect(database=db_name(system)))
            self.queries = Queries(AsyncpgDriver(aconn))

    def one(self, n: int, probe: bool = False) -> None:
        if self.system == "raw":
            from psycopg.types.json import Jsonb

            from benchmarks import rawloop

            row = list(rawloop.job_row(n))
            row[2] = Jsonb({"n": n, "probe": probe})
            self.conn.execute(rawloop.INSERT_ONE, row).fetchone()
        elif self.system == "ours":
            from django_jobs.models import Job

            Job.enqueue("peers.noop", {"n": n, "probe": probe})
        elif self.system == "tasksdb":
            from benchmarks.peers.peerapp.tasks import noop

            noop.enqueue(n=n, probe_=probe)
        elif self.system == "q2":
            from django_q.tasks import async_task

            async_task("benchmarks.peers.peerapp.tasks.q_noop", n, probe)
        elif self.system == "procrastinate":
            from benchmarks.peers.proc_app import noop

            noop.defer(n=n, probe_=probe)
        else:
            payload = f"{n} probe".encode() if probe else str(n).encode()
            self.loop.run_until_complete(self.queries.enqueue("noop", payload, 0))

    def bulk(self, count: int) -> str:
        """Enqueue ``count`` jobs in one transaction; returns how (for the report)."""
        if self.system == "raw":
            from benchmarks import rawloop

            rawloop.enqueue_bulk(self.conn, count)
            return "one multi-row INSERT"
        if self.system == "ours":
            from django_jobs.models import Job

            Job.enqueue_many("peers.noop", [{"n": n} for n in range(count)])
            return "Job.enqueue_many()"
        if self.system == "procrastinate":
            from benchmarks.peers.proc_app import noop

            noop.batch_defer(*[{"n": n} for n in range(count)])
            return "task.batch_defer()"
        if self.system == "pgqueuer":
            self.loop.run_until_complete(self.queries.enqueue(
                ["noop"] * count, [str(n).encode() for n in range(count)], [0] * count))
            return "Queries.enqueue() of lists"
        from django.db import transaction

        with transaction.atomic():
            for n in range(count):
                self.one(n)
        return "no bulk API: one by one in one transaction.atomic()"


def unfinished(conn: psycopg.Connection, system: str) -> int:
    return conn.execute(SYSTEMS[system].unfinished_sql).fetchone()[0]


def wait_empty(conn: psycopg.Connection, system: str) -> float:
    """Poll until no job is left unfinished; returns when that was seen (time.time())."""
    deadline = time.time() + WAIT_LIMIT_SECONDS
    while unfinished(conn, system):
        if time.time() > deadline:
            raise SystemExit(f"{system}: jobs still unfinished after {WAIT_LIMIT_SECONDS} s")
        time.sleep(POLL_SECONDS)
    return time.time()


def timed(func: Callable[[], Any], count: int) -> dict[str, Any]:
    start = time.perf_counter()
    how = func()
    return {"rate": count / (time.perf_counter() - start), "how": how}


def drain(producer: Producer, count: int, warmup: int) -> dict[str, Any]:
    """Warm the running workers up, then fill ``count`` jobs in one commit and time the drain."""
    with psycopg.connect(dsn(db_name(producer.system)), autocommit=True) as conn:
        for n in range(warmup):
            producer.one(-1 - n)
        wait_empty(conn, producer.system)
        start = time.time()
        producer.bulk(count)
        committed = time.time()
        done = wait_empty(conn, producer.system)
    return {"rate": count / (done - committed), "fill_seconds": committed - start}


def wake(producer: Producer, samples: int) -> dict[str, Any]:
    """Enqueue one probe at a time into an idle queue; the delay until its job starts."""
    probe_file = os.environ["PEERS_PROBE_FILE"]
    latencies = []
    for n in range(samples):
        time.sleep(random.uniform(0.05, 0.25))  # land anywhere in a polling worker's cycle
        producer.one(n, probe=True)
        committed = time.time()
        deadline = committed + 30
        while True:
            started = read_probe(probe_file, n)
            if started is not None:
                latencies.append(max(0.0, started - committed))
                break
            if time.time() > deadline:
                raise SystemExit(f"{producer.system}: probe {n} did not start within 30 s")
            time.sleep(0.0005)
    return {"latencies": latencies}


def read_probe(path: str, n: int) -> float | None:
    try:
        with open(path) as file:
            for line in file:
                index, _, when = line.partition(" ")
                if index == str(n) and when.endswith("\n"):
                    return float(when)
    except FileNotFoundError:
        return None
    return None


def main() -> None:
    system, op, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    producer = Producer(system)
    if op == "enqueue":
        result = timed(lambda: [producer.one(n) for n in range(count)] and "one by one", count)
    elif op == "bulk":
        result = timed(lambda: producer.bulk(count), count)
    elif op == "drain":
        result = drain(producer, count, int(sys.argv[4]))
    else:
        result = wake(producer, count)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
