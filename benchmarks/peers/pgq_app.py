"""PgQueuer's consumer: ``pgq run benchmarks.peers.pgq_app:main``."""

import os

import psycopg
from pgqueuer import PgQueuer
from pgqueuer.db import PsycopgDriver
from pgqueuer.models import Job

from benchmarks.peers import probe


async def main() -> PgQueuer:
    conn = await psycopg.AsyncConnection.connect(os.environ["PEERS_DSN"], autocommit=True)
    pgq = PgQueuer(PsycopgDriver(conn))

    @pgq.entrypoint("noop")
    async def noop(job: Job) -> None:
        n, _, flag = (job.payload or b"").decode().partition(" ")
        probe.run(int(n), flag == "probe")

    return pgq
