"""``pip install .`` ships the package with its migrations, templates and ``py.typed``."""

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_contains_migrations_and_py_typed(tmp_path):
    # Built from a copy of what a checkout holds: setuptools reuses a build/ directory left in
    # the working tree, files since deleted included.
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "django_jobs", source / "django_jobs",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(source), "--no-deps", "-q", "-w",
         str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("django_db_jobs-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "django_jobs/py.typed" in names
    migrations = {n for n in names if n.startswith("django_jobs/migrations/0")}
    on_disk = {f"django_jobs/migrations/{p.name}"
               for p in (ROOT / "django_jobs" / "migrations").glob("0*.py")}
    assert migrations == on_disk and migrations
    assert "django_jobs/management/commands/runworker.py" in names
    assert not any(n.startswith(("tests/", "example_project/")) for n in names)


WITHOUT_PSYCOPG = """
import sys
sys.modules["psycopg"] = None  # any import of psycopg now fails, as on a site without it
import django
from django.conf import settings
settings.configure(
    DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": sys.argv[1]}},
    INSTALLED_APPS=["django_jobs"], USE_TZ=True,
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
)
django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django_jobs import handler
from django_jobs.models import Job
from django_jobs.worker import Worker, WorkerOptions

@handler("plain")
def plain(payload):
    return payload["n"] * 2

job = Job.enqueue("plain", {"n": 21})
Worker(WorkerOptions(burst=True, concurrency=2)).run()
job.refresh_from_db()
print(job.status, job.result)
"""


def test_a_sqlite_site_without_psycopg_imports_and_runs_jobs(tmp_path):
    """psycopg is an extra: only the PostgreSQL paths import it, when they run."""
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_PSYCOPG, str(tmp_path / "db.sqlite3")],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["completed", "42"]
