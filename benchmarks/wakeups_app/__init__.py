"""The instruments of ``benchmarks/wakeups.py``, loaded into its ``runworker`` processes by
``benchmarks/settings_wakeups.py``.

- Counts every turn statement the worker sends (``finish_and_claim`` of the database's engine,
  one statement per call for no-op jobs): how many, how many claimed no job, how many neither
  claimed a job nor wrote an outcome (a wake-up or a poll for nothing), and the jobs claimed;
  and the notifications to every worker (``django_jobs``) its listener heard;
  written as JSON to ``$BENCH_COUNTS_DIR/<pid>.json`` when the process ends.
- With ``BENCH_WAKE_ALL=1``, the worker never registers as waiting (its listener's ``pid`` stays
  None), so every enqueue finds no waiter and wakes every worker on ``django_jobs``: the
  behaviour of migration 0002's trigger, for comparison in the same run.
"""

from __future__ import annotations

import atexit
import json
import os
from pathlib import Path

from django.apps import AppConfig


class WakeupsConfig(AppConfig):
    name = "benchmarks.wakeups_app"
    label = "bench_wakeups"

    def ready(self) -> None:
        if os.environ.get("BENCH_WAKE_ALL") == "1":
            from django_jobs.engine.postgres.listener import Listener

            Listener.pid = property(lambda self: None, lambda self, value: None)  # type: ignore
        folder = os.environ.get("BENCH_COUNTS_DIR")
        if folder:
            count_turns(Path(folder))


def count_turns(folder: Path) -> None:
    from django_jobs.engine.postgres.engine import PostgresEngine

    counts = {"statements": 0, "no_job": 0, "empty": 0, "jobs": 0}
    plain = PostgresEngine.finish_and_claim

    def finish_and_claim(self, outcomes, request):  # type: ignore[no-untyped-def]
        written, jobs = plain(self, outcomes, request)
        counts["statements"] += 1
        counts["jobs"] += len(jobs)
        if not jobs:
            counts["no_job"] += 1
            if not outcomes:
                counts["empty"] += 1
        return written, jobs

    PostgresEngine.finish_and_claim = finish_and_claim  # type: ignore[method-assign]

    from django_jobs.engine.postgres.listener import Listener

    serves = Listener._serves

    def counted(self, queue):  # type: ignore[no-untyped-def]
        counts["told_all"] = counts.get("told_all", 0) + 1  # a notification on django_jobs
        return serves(self, queue)

    Listener._serves = counted  # type: ignore[method-assign]
    atexit.register(lambda: (folder / f"{os.getpid()}.json").write_text(json.dumps(counts)))
