"""Settings of ``benchmarks/wakeups.py``: ``benchmarks/settings.py`` and its instruments."""

from benchmarks.settings import *  # noqa: F403
from benchmarks.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "benchmarks.wakeups_app.WakeupsConfig"]
