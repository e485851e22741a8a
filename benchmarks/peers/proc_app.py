"""Procrastinate's app: ``procrastinate --app=benchmarks.peers.proc_app.app worker``."""

import os

from procrastinate import App, PsycopgConnector

from benchmarks.peers import probe

app = App(connector=PsycopgConnector(conninfo=os.environ.get("PEERS_DSN", "")))


@app.task(name="noop")
def noop(n: int, probe_: bool = False) -> None:
    probe.run(n, probe_)
