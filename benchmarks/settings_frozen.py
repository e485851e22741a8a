"""Settings of ``benchmarks/frozen_waiter.py``: ``benchmarks/settings.py`` and its instrument."""

from benchmarks.settings import *  # noqa: F403
from benchmarks.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "benchmarks.frozen_app.FrozenConfig"]
