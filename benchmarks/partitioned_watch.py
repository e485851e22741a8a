"""Watching a statement of ``benchmarks/partitioned_history.py``: its duration, the table locks
it holds (``pg_locks``) and the longest wait of a claim-like probe on another connection."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager

import psycopg

from benchmarks.partitioned_layouts import READY


class Probe(threading.Thread):
    """A claim-like read of the open rows every 10 ms on its own connection; the longest
    one while ``window`` is open is what a worker's claim would have waited."""

    def __init__(self, dsn: str, table: str) -> None:
        super().__init__(daemon=True)
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.table = table
        self.longest = 0.0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            start = time.perf_counter()
            try:
                self.conn.execute(f"SELECT id FROM {self.table} WHERE status IN {READY} "
                                  "ORDER BY priority DESC, run_at, id LIMIT 1 "
                                  "FOR UPDATE SKIP LOCKED")
            except psycopg.Error:  # the table renamed under it: the next read finds the new one
                pass
            self.longest = max(self.longest, time.perf_counter() - start)
            time.sleep(0.01)

    @contextmanager
    def window(self):
        self.longest = 0.0
        yield self
        time.sleep(0.02)

    def close(self) -> None:
        self.stop.set()
        self.join()
        self.conn.close()


class Sampler(threading.Thread):
    """The relation locks ``pid`` holds or waits for, sampled every 2 ms from another session
    (for statements that cannot run in a transaction)."""

    def __init__(self, dsn: str, pid: int) -> None:
        super().__init__(daemon=True)
        self.conn = psycopg.connect(dsn, autocommit=True)
        self.pid = pid
        self.seen: set[tuple[str, str]] = set()
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            for relation, mode in self.conn.execute(LOCKS, [self.pid]).fetchall():
                self.seen.add((relation, mode))
            time.sleep(0.002)

    def close(self) -> set[tuple[str, str]]:
        self.stop.set()
        self.join()
        self.conn.close()
        return self.seen


LOCKS = """SELECT c.relname, l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
WHERE l.pid = %s AND c.relkind IN ('r', 'p') AND c.relnamespace = 'public'::regnamespace"""


def step(conn: psycopg.Connection, probe: Probe, dsn: str, name: str, statements: list[str],
         in_transaction: bool = True) -> dict:
    """Run ``statements`` (one transaction unless ``in_transaction`` is false), timed, with
    the table locks they hold and the probe's longest wait."""
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    with probe.window():
        start = time.perf_counter()
        if in_transaction:
            with conn.transaction():
                for statement in statements:
                    conn.execute(statement)
                locks = set(conn.execute(LOCKS, [pid]).fetchall())
        else:
            sampler = Sampler(dsn, pid)
            sampler.start()
            for statement in statements:
                conn.execute(statement)
            locks = sampler.close()
        took = time.perf_counter() - start
    held: dict[str, list[str]] = {}
    for relation, mode in sorted(locks):
        held.setdefault(relation, []).append(mode)
    row = {"step": name, "seconds": round(took, 4), "locks": held,
           "probe_longest_ms": round(probe.longest * 1000, 1), "sql": statements}
    print(f"  {name:<48} {took:>8.3f} s  probe {probe.longest * 1000:>7.1f} ms  "
          + "; ".join(f"{r}: {','.join(m)}" for r, m in held.items()))
    return row
