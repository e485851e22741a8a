"""The instrument of ``benchmarks/frozen_waiter.py``, loaded into its ``runworker`` processes
by ``benchmarks/settings_frozen.py``: counts every statement the worker sends on its Django
connections (the loop's and its threads': claims, looks, heartbeats; the listener's own
connection sends none while it waits), and writes the count as JSON to
``$BENCH_COUNTS_DIR/<pid>.json`` every half second, so the benchmark reads it while the worker
runs."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

from django.apps import AppConfig


class FrozenConfig(AppConfig):
    name = "benchmarks.frozen_app"
    label = "bench_frozen"

    def ready(self) -> None:
        folder = os.environ.get("BENCH_COUNTS_DIR")
        if folder:
            count_statements(Path(folder))


def count_statements(folder: Path) -> None:
    from django.db.backends.signals import connection_created

    counts = {"statements": 0}

    def counted(execute, sql, params, many, context):  # type: ignore[no-untyped-def]
        counts["statements"] += 1
        return execute(sql, params, many, context)

    def created(sender, connection, **kwargs):  # type: ignore[no-untyped-def]
        if counted not in connection.execute_wrappers:  # a reconnect keeps the list
            connection.execute_wrappers.append(counted)

    connection_created.connect(created, weak=False)
    path = folder / f"{os.getpid()}.json"

    def write() -> None:
        while True:
            path.write_text(json.dumps(counts))
            time.sleep(0.5)

    threading.Thread(target=write, name="bench-counts", daemon=True).start()
