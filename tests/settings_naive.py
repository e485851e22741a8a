"""The test settings with ``USE_TZ = False``: naive times, read in ``TIME_ZONE``.

The zone is five and a half hours from UTC, so a time shown or compared in the wrong zone is
off by an amount no test tolerates. The test databases are named apart from tests.settings'
so that a run under this module (tests/fidelity/test_naive_times.py starts one) never meets the one
that started it.
"""

import os

from tests.settings import *  # noqa: F403
from tests.settings import DATABASES, ENGINE

USE_TZ = False
TIME_ZONE = "Asia/Kolkata"

_default = DATABASES["default"]
_default["TEST"]["NAME"] = _naive = _default["TEST"]["NAME"].replace(
    "test_django_jobs", "test_django_jobs_naive")
if ENGINE == "sqlite" and "JOBS_DB_NAME" not in os.environ:
    _default["NAME"] = _naive
