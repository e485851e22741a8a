"""The commands as an operator runs them: usage and one line for bad options, one clear line
for a database that was never migrated (an empty SQLite file, an empty PostgreSQL database)."""

import os
import shutil
import subprocess
import sys
import uuid

import psycopg
import pytest

from django_jobs.management.commands.runworker import MAX_CONCURRENCY
from tests.conftest import ROOT, requires_postgres

SUFFIX = os.environ.get("DJANGO_JOBS_TEST_SUFFIX", "")


def manage(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "django", *args, "--settings=tests.settings"],
        capture_output=True, text=True, cwd=ROOT, timeout=120,
        env={**os.environ, "JOBS_DB_NAME": "unused", **(env or {})},
    )


@pytest.mark.db_independent  # its own databases, whatever the run's: once per Django
@pytest.mark.parametrize("args, message", [
    (["runworker", "--concurrency", "0"], "argument --concurrency: must be at least 1, not 0"),
    (["runworker", "--concurency", "3"], "unrecognized arguments: --concurency 3"),
    (["runworker", "--concurrency", "100000"], f"at most {MAX_CONCURRENCY}, not 100000"),
    (["runworker", "--queues", "a b"], "bad queue name"),
    (["runworker", "--poll-interval", "inf"], "must be from 0.01 to 86400 seconds, not inf"),
    (["runworker", "--lease", "nan"], "must be from 0.01 to 86400 seconds, not nan"),
    (["runworker", "--processes", "0"], "argument --processes: must be at least 1, not 0"),
    (["runworker", "--processes", "all"], "argument --processes: 'all' is not an integer"),
    (["prunejobs", "--dead", "soon"], "is not an age"),
    (["jobs", "show", "1"], "is not a job id"),
    (["jobstoken"], "the following arguments are required: ACTION"),
])
def test_a_bad_option_prints_usage_and_one_line(args, message):
    result = manage(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: ") and "Traceback" not in result.stderr
    last = result.stderr.splitlines()[-1]
    assert f" {args[0]}" in last and ": error: " in last and message in last


@pytest.mark.db_independent  # its own databases, whatever the run's: once per Django
def test_runworker_help_shows_each_default():
    result = manage("runworker", "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    for option in ("--queues", "--concurrency", "--burst", "--reload", "--max-jobs",
                   "--poll-interval", "--worker-id", "--shutdown-timeout", "--lease",
                   "--heartbeat", "--processes", "--max-memory-per-process"):
        help_text = text.split(f"{option} ", 2)[-1].split(" --", 1)[0]
        assert "(default: " in help_text, option


COMMANDS = [["runworker", "--burst"], ["jobs", "list"], ["jobstoken", "list"], ["prunejobs"]]


def assert_one_line_about_migrate(result: subprocess.CompletedProcess) -> None:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("CommandError: database 'default' is not")
    assert lines[0].endswith("run `manage.py migrate`")


@pytest.mark.db_independent  # its own databases, whatever the run's: once per Django
@pytest.mark.parametrize("args", COMMANDS)
def test_an_empty_sqlite_file_is_one_line(args, tmp_path):
    database = tmp_path / "empty.sqlite3"
    database.touch()
    result = manage(*args, env={"JOBS_DB_NAME": str(database), "DJANGO_JOBS_TEST_DB": "sqlite"})
    assert_one_line_about_migrate(result)


@pytest.mark.db_independent  # its own databases, whatever the run's: once per Django
def test_the_system_check_warns_and_migrate_still_runs(tmp_path):
    env = {"JOBS_DB_NAME": str(tmp_path / "fresh.sqlite3"), "DJANGO_JOBS_TEST_DB": "sqlite"}
    check = manage("check", "--database", "default", env=env)
    assert "django_jobs.W002" in check.stderr and "run `manage.py migrate`" in check.stderr
    assert manage("check", env=env).stderr == ""  # no database: database checks do not run
    assert manage("migrate", "-v", "0", env=env).returncode == 0
    after = manage("check", "--database", "default", env=env)
    assert after.returncode == 0 and "W002" not in after.stderr
    assert manage("jobs", "list", env=env).stdout == "no jobs\n"


@pytest.mark.db_independent  # its own databases, whatever the run's: once per Django
def test_the_warning_says_run_migrate_once(tmp_path):
    env = {"JOBS_DB_NAME": str(tmp_path / "fresh.sqlite3"), "DJANGO_JOBS_TEST_DB": "sqlite"}
    check = manage("check", "--database", "default", env=env)
    assert check.stderr.count("run `manage.py migrate`") == 1, check.stderr
    assert "HINT: run `manage.py migrate`" in check.stderr


@pytest.mark.db_independent  # its own databases, whatever the run's: once per Django
def test_the_example_projects_first_migrate_prints_no_warning(tmp_path):
    """``manage.py migrate`` of the example project on a fresh SQLite file, as a newcomer runs
    it: the migrations are applied and the not-migrated check, which migrate runs first, is
    quiet."""
    site = tmp_path / "site"
    shutil.copytree(ROOT / "example_project", site,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.sqlite3*"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    result = subprocess.run([sys.executable, "manage.py", "migrate"], capture_output=True,
                            text=True, cwd=site, env=env, timeout=300)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert "Applying django_jobs.0001_initial... OK" in result.stdout
    assert (site / "db.sqlite3").is_file()
    assert "W002" not in output and "System check identified" not in output, output
    check = subprocess.run([sys.executable, "manage.py", "check", "--database", "default",
                            "--fail-level", "WARNING"], capture_output=True, text=True,
                           cwd=site, env=env, timeout=120)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.fixture
def empty_postgres_database():
    name = f"django_jobs_empty{SUFFIX}_{uuid.uuid4().hex[:8]}"
    admin = psycopg.connect(host="127.0.0.1", user="postgres", dbname="postgres",
                            autocommit=True)
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield name
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@requires_postgres
@pytest.mark.parametrize("args", COMMANDS)
def test_an_empty_postgres_database_is_one_line(args, empty_postgres_database):
    result = manage(*args, env={"JOBS_DB_NAME": empty_postgres_database,
                                "DJANGO_JOBS_TEST_DB": "postgres"})
    assert_one_line_about_migrate(result)


@pytest.mark.db_independent  # its own databases, whatever the run's: once per Django
def test_a_database_that_cannot_be_reached_is_one_line():
    result = manage("jobs", "counts", env={"DJANGO_JOBS_TEST_DB": "postgres", "PGPORT": "1",
                                           "JOBS_DB_NAME": "anything"})
    assert result.returncode == 1 and "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("CommandError: cannot read database 'default'")


@pytest.mark.db_independent  # its own databases, whatever the run's: once per Django
def test_runworker_refuses_an_unsupported_backend_in_one_line():
    env = {"DJANGO_JOBS_TEST_DB": "unsupported"}
    checked = manage("runworker", "--burst", env=env)  # Django's checks before the command
    assert checked.returncode == 1 and "Traceback" not in checked.stderr
    assert "SystemCheckError" in checked.stderr
    assert "(django_jobs.E020) django-jobs does not support the 'unknown' database" in (
        checked.stderr)
    skipped = manage("runworker", "--burst", "--skip-checks", env=env)  # the worker's own
    assert skipped.returncode == 1 and "Traceback" not in skipped.stderr
    assert skipped.stderr.strip().splitlines() == [
        "CommandError: django_jobs.E020: django-jobs does not support the 'unknown' database "
        "of DATABASES['default'] (use PostgreSQL, SQLite, MariaDB 10.6+ or MySQL 8.0.1+)"]
