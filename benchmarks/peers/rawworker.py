"""The raw baseline as a long-running worker: ``benchmarks/rawloop.py``'s claim and finish,
polling every 10 ms while the queue is empty, until SIGTERM.

    python -m benchmarks.peers.rawworker DSN --k 10
"""

from __future__ import annotations

import argparse
import signal
import time

import psycopg

from benchmarks import rawloop
from benchmarks.peers import probe

POLL_SECONDS = 0.01


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dsn")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args()
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    with psycopg.connect(args.dsn, autocommit=True) as conn, conn.cursor() as cur:
        while running[0]:
            cur.execute(rawloop.CLAIM, ("raw", args.k))
            jobs = cur.fetchall()
            if not jobs:
                time.sleep(POLL_SECONDS)
                continue
            for _id, _type, payload, _attempt in jobs:
                probe.run(payload["n"], payload.get("probe", False))
            cur.execute(rawloop.DONE, ([row[0] for row in jobs],))


if __name__ == "__main__":
    main()
