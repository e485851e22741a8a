"""Settings of ``benchmarks/probes_guarantees.py``: the test settings (the database chosen by
DJANGO_JOBS_TEST_DB and named by JOBS_DB_NAME), or with DJANGO_JOBS_TEST_ROUTER the routed ones
of ``tests/settings_routers.py``, plus the probes' handlers and a host for ``runserver``."""

import os

if os.environ.get("DJANGO_JOBS_TEST_ROUTER"):
    from tests.settings_routers import *  # noqa: F403
else:
    from tests.settings import *  # noqa: F403
from tests.settings import INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "benchmarks.probes_app"]
ALLOWED_HOSTS = ["127.0.0.1", "localhost"]
