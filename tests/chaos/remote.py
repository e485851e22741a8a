"""Enqueue and read back jobs on a database other than the test run's, in a subprocess.

``python -m tests.chaos.remote enqueue COUNT LOG SLEEP`` and ``... summary`` (prints the
ledger's records as JSON), run with the environment that points tests/settings.py at that
database (DJANGO_JOBS_TEST_DB, PGHOST, PGPORT, JOBS_DB_NAME).
"""

from __future__ import annotations

import os
import subprocess
import sys

from tests.chaos.ledger import JobRecord, records_from_json
from tests.settings import BASE

ROOT = BASE.parent


def call(env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "tests.chaos.remote", *args], cwd=ROOT, env={**os.environ, **env},
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def summary(env: dict[str, str]) -> dict[str, JobRecord]:
    return records_from_json(call(env, "summary"))


def main(argv: list[str]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")
    import django

    django.setup()
    from django_jobs.models import Job
    from tests.chaos.ledger import collect, records_to_json

    if argv[0] == "enqueue":
        count, log, sleep = int(argv[1]), argv[2], float(argv[3])
        Job.enqueue_many("chaos_record", [{"log": log, "sleep": sleep}] * count)
    elif argv[0] == "summary":
        sys.stdout.write(records_to_json(collect()))
    else:
        raise SystemExit(f"unknown command {argv[0]!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
