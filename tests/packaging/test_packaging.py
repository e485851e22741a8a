"""The distribution: sdist and wheel build, pass ``twine check``, ship the migrations,
templates and ``py.typed``, and install and run on their own."""

import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT

pytestmark = pytest.mark.db_independent  # no database: once per Django in the whole suite

DIST_NAME = "django_db_jobs"  # the PyPI name, django-db-jobs, as file names spell it


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    """The sdist and the wheel, built with ``python -m build`` (the wheel from the sdist).

    Built from a copy of what a checkout holds: setuptools reuses a build/ directory left in
    the working tree, files since deleted included."""
    tmp = tmp_path_factory.mktemp("dist")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "django_jobs", source / "django_jobs",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp / "out"
    result = subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(out), str(source)],
        capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return out


@pytest.mark.slow
@pytest.mark.once
def test_sdist_and_wheel_build_and_pass_twine_check(dist):
    (sdist,) = dist.glob(f"{DIST_NAME}-*.tar.gz")
    (wheel,) = dist.glob(f"{DIST_NAME}-*.whl")
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)],
        capture_output=True, text=True, timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 2, result.stdout


@pytest.mark.slow
@pytest.mark.once
def test_sdist_and_wheel_carry_the_license(dist):
    """The BSD-3-Clause text ships in both, and the metadata names it (PEP 639)."""
    text = (ROOT / "LICENSE").read_text()
    assert "BSD 3-Clause License" in text
    (sdist,) = dist.glob(f"{DIST_NAME}-*.tar.gz")
    with tarfile.open(sdist) as tar:
        (member,) = [m for m in tar.getmembers() if m.name.endswith("/LICENSE")]
        assert tar.extractfile(member).read().decode() == text
        (pkg_info,) = [m for m in tar.getmembers() if m.name.count("/") == 1
                       and m.name.endswith("/PKG-INFO")]
        sdist_metadata = tar.extractfile(pkg_info).read().decode()
    (wheel,) = dist.glob(f"{DIST_NAME}-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (license_name,) = [n for n in archive.namelist()
                           if n.endswith(".dist-info/licenses/LICENSE")]
        assert archive.read(license_name).decode() == text
        (metadata_name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        wheel_metadata = archive.read(metadata_name).decode()
    for metadata in (sdist_metadata, wheel_metadata):
        assert "\nLicense-Expression: BSD-3-Clause\n" in metadata
        assert "\nLicense-File: LICENSE\n" in metadata


@pytest.mark.slow
@pytest.mark.once
def test_wheel_contains_migrations_and_py_typed(dist):
    (wheel,) = dist.glob(f"{DIST_NAME}-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "django_jobs/py.typed" in names
    migrations = {n for n in names if n.startswith("django_jobs/migrations/0")}
    on_disk = {f"django_jobs/migrations/{p.name}"
               for p in (ROOT / "django_jobs" / "migrations").glob("0*.py")}
    assert migrations == on_disk and migrations
    assert "django_jobs/management/commands/runworker.py" in names
    assert not any(n.startswith(("tests/", "example_project/")) for n in names)
    (metadata,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    assert "django_jobs = django_jobs.pytest_plugin" in zipfile.ZipFile(wheel).read(
        metadata).decode()


@pytest.mark.slow
@pytest.mark.once
@pytest.mark.parametrize("kind", ["sdist", "wheel"])
def test_installed_in_a_fresh_virtualenv_the_demo_runs(dist, kind, tmp_path):
    """The artifact installed alone (Django and cronsim from the index) runs the example
    project's demo, importing the installed package, not the checkout."""
    (artifact,) = dist.glob(f"{DIST_NAME}-*.tar.gz" if kind == "sdist" else f"{DIST_NAME}-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    python = str(venv / "bin" / "python")
    install = subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(artifact)],
        capture_output=True, text=True, timeout=600,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    site = tmp_path / "site"  # the example project, away from the checkout
    shutil.copytree(ROOT / "example_project", site,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.sqlite3*"))
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL")}
    where = subprocess.run(
        [python, "-c", "import django_jobs; print(django_jobs.__file__)"],
        capture_output=True, text=True, timeout=60, cwd=site, env=env,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout
    demo = subprocess.run(
        [python, "manage.py", "demo", "-v", "0"],
        capture_output=True, text=True, timeout=300, cwd=site, env=env,
    )
    assert demo.returncode == 0, demo.stdout + demo.stderr
    assert re.search(r"flaky .* completed .*\[failed,failed,completed\]", demo.stdout), demo.stdout
    assert re.search(r"broken .* dead ", demo.stdout), demo.stdout


def install_commands(path: Path, heading: str) -> list[str]:
    """The ``pip install`` lines of the first ``sh`` block after ``heading``, comments off."""
    text = path.read_text()
    block = re.search(r"```sh\n(.*?)```", text[text.index(heading):], re.S)
    assert block, f"no sh block after {heading!r} in {path.name}"
    return [line.split("#")[0].strip() for line in block.group(1).splitlines()
            if line.startswith("pip install")]


def test_the_readme_and_the_quickstart_install_the_same_way():
    """What the README tells a newcomer to run is what the quickstart says, and installs from
    a checkout: the package is not on PyPI until the first release."""
    readme = install_commands(ROOT / "README.md", "## Install")
    assert readme == ["pip install ."]
    quickstart = install_commands(ROOT / "docs" / "tutorial-quickstart.md", "## 1. Install")
    assert quickstart[0] == readme[0]
    # No page tells a user to install the PyPI name (CONTRIBUTING.md's release procedure says
    # when to).
    for path in (ROOT / "README.md", *(ROOT / "docs").glob("*.md")):
        for line in path.read_text().splitlines():
            assert not re.search(r"pip install \"?django-db-jobs", line), f"{path.name}: {line}"


def test_the_publish_workflow_builds_and_uploads_through_trusted_publishing():
    text = (ROOT / ".github" / "workflows" / "publish.yml").read_text()
    for needed in ("release:", "types: [published]", "python -m build",
                   "id-token: write", "pypa/gh-action-pypi-publish@release/v1",
                   "twine check --strict"):
        assert needed in text, needed
    assert "password:" not in text and "PYPI_API_TOKEN" not in text  # no stored token


@pytest.mark.slow
@pytest.mark.once
def test_the_readme_install_command_works_in_a_checkout(dist, tmp_path):
    """The README's install block, run as written in a fresh virtual environment from the
    root of a copy of the checkout, installs a package that runs a job."""
    source = dist.parent / "source"
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    for command in install_commands(ROOT / "README.md", "## Install"):
        ran = subprocess.run(command + " -q --disable-pip-version-check", shell=True,  # noqa: S602
                             capture_output=True, text=True, timeout=600, cwd=source, env=env)
        assert ran.returncode == 0, command + "\n" + ran.stdout + ran.stderr
    python = str(venv / "bin" / "python")
    where = subprocess.run(
        [python, "-c", "import django_jobs; print(django_jobs.__file__)"],
        capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env,
    )
    assert where.returncode == 0, where.stderr
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout
    ran = subprocess.run([python, "-c", WITHOUT_PSYCOPG, str(tmp_path / "db.sqlite3")],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert ran.stdout.split() == ["completed", "42"]


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
from django_jobs.worker.loop import Worker
from django_jobs.worker.options import WorkerOptions

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
