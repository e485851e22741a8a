"""``pip install .`` ships the package with its migrations, templates and ``py.typed``."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_wheel_contains_migrations_and_py_typed(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w", str(tmp_path)],
        capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr
    (wheel,) = tmp_path.glob("django_jobs-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "django_jobs/py.typed" in names
    migrations = {n for n in names if n.startswith("django_jobs/migrations/0")}
    on_disk = {f"django_jobs/migrations/{p.name}"
               for p in (ROOT / "django_jobs" / "migrations").glob("0*.py")}
    assert migrations == on_disk and migrations
    assert "django_jobs/management/commands/runworker.py" in names
    assert not any(n.startswith(("tests/", "example_project/")) for n in names)
