import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection
from django.test.testcases import QuietWSGIRequestHandler
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

ROOT = Path(__file__).resolve().parent.parent

# Property-based tests: a moderate number of examples by default, HYPOTHESIS_PROFILE=big for a
# long run by hand. No example database: nothing is written into the working tree. Deadlines
# are off because examples write to a real database on a shared machine; Django's
# function-scoped database fixtures are meant to be shared by all examples of a test.
hypothesis_settings.register_profile(
    "default", max_examples=50, deadline=None, database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
hypothesis_settings.register_profile(
    "big", hypothesis_settings.get_profile("default"), max_examples=1000
)
hypothesis_settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


# The live server (live_server: the API's schemathesis runs, the browser tests) answers
# keep-alive connections. With Nagle's algorithm on, the second small write of a response (its
# body after its headers) waits for the client's delayed ACK, some 40 ms a request; every
# production server sends with TCP_NODELAY, and so does the test server.
QuietWSGIRequestHandler.disable_nagle_algorithm = True


def on_postgres() -> bool:
    return connection.vendor == "postgresql"


@pytest.fixture(autouse=True)
def _last_day_read(request):
    """On PostgreSQL's partitioned table a write that finishes a job reads the last day made
    now and then (``engine/postgres/partitions.py``, cached for ``CACHE_SECONDS``): read it
    afresh before each test that uses the database, so that a test counting a finish's
    statements counts those of the finish. A value only looked up could be nearly that old, and
    be read again inside the count. Whether the table moves rows (``engine/moved_rows.py``),
    read at a process's first wrapped write in a transaction, is read here too."""
    if on_postgres() and request.node.get_closest_marker("django_db"):
        from django_jobs.engine.moved_rows import moves_rows
        from django_jobs.engine.postgres import partitions

        request.getfixturevalue("django_db_setup")
        with request.getfixturevalue("django_db_blocker").unblock():
            partitions.forget(connection.alias)
            partitions.last_day(connection.alias)
            moves_rows(connection.alias)
    yield


@pytest.fixture(autouse=True)
def _no_counts_kept():
    """The counts of finished jobs a process keeps until its next flush
    (``engine/finish_counts.py``): none left over from another test's finishes, whose rows that
    test's database held."""
    from django_jobs.engine import finish_counts, hooks

    finish_counts.forget()
    hooks.forget()  # nor which features a heartbeat of another test's decided were configured
    yield


requires_postgres = pytest.mark.skipif(
    os.environ.get("DJANGO_JOBS_TEST_DB", "sqlite") != "postgres", reason="needs PostgreSQL"
)
# Many writers at once, claiming with row locks (SKIP LOCKED): PostgreSQL or MariaDB.
requires_row_locks = pytest.mark.skipif(
    os.environ.get("DJANGO_JOBS_TEST_DB", "sqlite") not in ("postgres", "mariadb"),
    reason="needs PostgreSQL or MariaDB",
)


def settings_module() -> str:
    """The settings module this run of the tests uses (tests.settings, or tests.settings_naive
    for ``USE_TZ = False``), for the subprocesses a test starts."""
    return os.environ.get("DJANGO_SETTINGS_MODULE", "tests.settings")


class WorkerProcess:
    """A real ``manage.py runworker`` subprocess on the test database."""

    def __init__(self, *args: str, env: dict | None = None) -> None:
        db_name = settings.DATABASES["default"]["NAME"]
        full_env = {**os.environ, "JOBS_DB_NAME": str(db_name), "PYTHONUNBUFFERED": "1"}
        full_env.update(env or {})
        self.log = open(ROOT / "tests" / "artifacts" / f"worker-{time.time_ns()}.log", "w+")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "django", "runworker", f"--settings={settings_module()}", *args],
            cwd=ROOT, env=full_env, stdout=self.log, stderr=subprocess.STDOUT,
        )

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def wait(self, timeout: float = 60) -> int:
        return self.proc.wait(timeout=timeout)

    def output(self) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self.log.close()


@pytest.fixture
def start_worker():
    started: list[WorkerProcess] = []

    def start(*args: str, env: dict | None = None) -> WorkerProcess:
        worker = WorkerProcess(*args, env=env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.05):
    """Poll ``predicate`` until it returns something truthy (for subprocess tests only)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def pytest_collection_modifyitems(config, items):
    """Tests that need not run in every run of the whole suite (``scripts/test``).

    On a second Django (``DJANGO_JOBS_ONCE_PER_DATABASE``) the chaos and pooler tests run once
    per database only: they test processes, signals and the network, which do not change with
    Django's version, and they are the suite's slowest; so are the passes of other files under
    another settings module (``settings_pass``). After the first run of the whole suite
    (``DJANGO_JOBS_ONCE_PER_SUITE``) the tests marked ``once`` are left out: they build and
    install the package, which neither the database nor Django's version changes. After the first
    run on a Django (``DJANGO_JOBS_ONCE_PER_DJANGO``) the tests marked ``db_independent`` are
    left out: they use no database (pure functions, the package's layers) or only databases of
    their own, so the run's database does not change them; another Django runs them again."""
    skips = []
    if os.environ.get("DJANGO_JOBS_ONCE_PER_DATABASE"):
        skips.append((("chaos", "pooler", "settings_pass"), pytest.mark.skip(
            reason="chaos, pooler and settings-pass tests run once per database, on Django 5.2")))
    if os.environ.get("DJANGO_JOBS_ONCE_PER_SUITE"):
        skips.append((("once",), pytest.mark.skip(
            reason="builds and installs the package: run once, in the suite's first run")))
    if os.environ.get("DJANGO_JOBS_ONCE_PER_DJANGO"):
        skips.append((("db_independent",), pytest.mark.skip(
            reason="needs not the run's database: run in the first run on this Django")))
    for item in items:
        for names, skip in skips:
            if any(item.get_closest_marker(name) for name in names):
                item.add_marker(skip)
