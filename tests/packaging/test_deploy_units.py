"""The systemd units shipped in deploy/systemd: systemd itself finds nothing wrong with them."""

import configparser
import re
import shutil
import subprocess
import sys

import pytest

from django_jobs.management.commands.runworker import Command
from tests.conftest import ROOT

pytestmark = pytest.mark.db_independent  # no database: once per Django in the whole suite

UNITS = ROOT / "deploy" / "systemd"
SERVICE = UNITS / "django-jobs-worker@.service"


def service() -> configparser.ConfigParser:
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str  # keys are case-sensitive
    parser.read(SERVICE)
    return parser


def test_the_service_waits_for_ready_and_is_watched():
    unit = service()["Service"]
    assert unit["Type"] == "notify" and unit["NotifyAccess"] == "main"
    assert int(unit["WatchdogSec"]) > 0
    assert "\nEnvironment=DJANGO_SETTINGS_MODULE=mysite.settings\n" in SERVICE.read_text()


def test_the_service_starts_runworker_with_options_it_accepts():
    argv = service()["Service"]["ExecStart"].split()
    assert argv[1:3] == ["manage.py", "runworker"]
    options = Command().create_parser("manage.py", "runworker").parse_args(
        [arg.replace("%H", "host").replace("%i", "1") for arg in argv[3:]]
    )
    assert options.concurrency == 8


def test_the_docs_the_units_point_to_exist():
    named = {
        path
        for unit in UNITS.iterdir()
        for path in re.findall(r"docs/[\w./-]+\.md", unit.read_text())
    }
    assert named, "the units point to the deployment how-to"
    assert [path for path in named if not (UNITS.parent.parent / path).is_file()] == []


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="needs systemd-analyze")
def test_systemd_analyze_verify_finds_nothing(tmp_path):
    """Paths and user swapped for ones this machine has, so verify checks the rest."""
    text = SERVICE.read_text().replace("/srv/app/.venv/bin/python", sys.executable)
    text = text.replace("User=app", "User=root").replace("Group=app", "Group=root")
    (tmp_path / SERVICE.name).write_text(text.replace("/srv/app", str(tmp_path)))
    shutil.copy(UNITS / "django-jobs-workers.target", tmp_path)
    result = subprocess.run(
        ["systemd-analyze", "verify", "--man=no", "./django-jobs-worker@1.service",
         "./django-jobs-workers.target"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 0 and result.stderr == "", result.stderr
