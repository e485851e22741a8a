"""Settings for ``benchmarks/mariadb_throughput.py``: a dedicated MariaDB database, nothing else.

The benchmark creates and drops the database itself (``BENCH_DB_NAME``, default
``bench_django_jobs``); MARIADB_HOST, MARIADB_PORT and MARIADB_USER say where MariaDB is.
"""

import os

DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.mysql",
        "NAME": os.environ.get("BENCH_DB_NAME", "bench_django_jobs"),
        "USER": os.environ.get("MARIADB_USER", "root"),
        "HOST": os.environ.get("MARIADB_HOST", "127.0.0.1"),
        "PORT": os.environ.get("MARIADB_PORT", "3306"),
        "OPTIONS": {"isolation_level": "read committed", "charset": "utf8mb4"},
        "CONN_MAX_AGE": None,
    }
}
SECRET_KEY = "benchmarks-only-not-secret"
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = ["django_jobs", "benchmarks.noop_app"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DJANGO_JOBS: dict = {}
