"""PgQueuer's consumer: ``pgq run benchmarks.peers.pgq_app:main``."""

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
from pgqueuer import PgQueuer
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job

from benchmarks.peers import probe


@asynccontextmanager
async def main() -> AsyncIterator[PgQueuer]:
    # asyncpg, the driver of PgQueuer's quick start and its performance guide.
    conn = await asyncpg.connect(database=os.environ["PEERS_DB"])
    pgq = PgQueuer(AsyncpgDriver(conn))

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        n, _, flag = (job.payload or b"").decode().partition(" ")
        probe.run(int(n), flag == "probe")

    try:
        yield pgq
    finally:
        await conn.close()


if __name__ == "__main__":
    # What ``pgq run benchmarks.peers.pgq_app:main [--batch-size N]`` does, through PgQueuer's
    # documented programmatic entry point: pgqueuer 1.6.0's CLI fails on its own default
    # --log-level with typer 0.29 ('str' object has no attribute 'name').
    import argparse
    import asyncio
    import logging

    import pgqueuer

    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=10)
    logging.basicConfig(level=logging.INFO)
    batch_size = parser.parse_args().batch_size
    asyncio.run(pgqueuer.run("benchmarks.peers.pgq_app:main", batch_size=batch_size))
