"""Test settings: SQLite file by default, PostgreSQL with DJANGO_JOBS_TEST_DB=postgres, MariaDB
with DJANGO_JOBS_TEST_DB=mariadb, an unsupported backend with DJANGO_JOBS_TEST_DB=unsupported.

Subprocess workers started by the tests read JOBS_DB_NAME to open the test database.
"""

import os
from importlib.util import find_spec
from pathlib import Path
from typing import Any

BASE = Path(__file__).resolve().parent
(BASE / "artifacts").mkdir(exist_ok=True)
ENGINE = os.environ.get("DJANGO_JOBS_TEST_DB", "sqlite")
SUFFIX = os.environ.get("DJANGO_JOBS_TEST_SUFFIX", "")

if ENGINE == "postgres":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.postgresql",
            "NAME": os.environ.get("JOBS_DB_NAME", "test"),
            "USER": os.environ.get("PGUSER", "postgres"),
            "HOST": os.environ.get("PGHOST", "127.0.0.1"),
            "PORT": os.environ.get("PGPORT", "5432"),
            "TEST": {"NAME": f"test_django_jobs{SUFFIX}"},
        }
    }
elif ENGINE == "mariadb":
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.mysql",
            "NAME": os.environ.get("JOBS_DB_NAME", "test"),
            "USER": os.environ.get("MARIADB_USER", "root"),
            "HOST": os.environ.get("MARIADB_HOST", "127.0.0.1"),
            "PORT": os.environ.get("MARIADB_PORT", "3306"),
            "OPTIONS": {
                # READ COMMITTED, as django-jobs asks of MariaDB (docs/explanation-databases.md):
                # under REPEATABLE READ a locking read takes gap locks, so claims that skip
                # locked rows and concurrent inserts block each other, and a claim re-reads the
                # snapshot its transaction started with.
                "isolation_level": "read committed",
                "charset": "utf8mb4",
                # A test's subprocess may run one more statement on connecting (a session's
                # sql_mode, say).
                **({"init_command": os.environ["DJANGO_JOBS_TEST_MARIADB_INIT"]}
                   if os.environ.get("DJANGO_JOBS_TEST_MARIADB_INIT") else {}),
            },
            "TEST": {"NAME": f"test_django_jobs{SUFFIX}", "CHARSET": "utf8mb4",
                     "COLLATION": "utf8mb4_unicode_ci"},
        }
    }
elif ENGINE == "unsupported":
    # Django's dummy backend, standing in for a database django-jobs was not built for (a
    # test's subprocess only: it cannot run a query).
    DATABASES = {"default": {"ENGINE": "django.db.backends.dummy"}}
else:
    sqlite_file = str(BASE / "artifacts" / f"test_django_jobs{SUFFIX}.sqlite3")
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": os.environ.get("JOBS_DB_NAME", sqlite_file),
            "TEST": {"NAME": sqlite_file},
            "OPTIONS": {
                "transaction_mode": "IMMEDIATE",
                "timeout": 30,
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }

if ENGINE != "unsupported":
    # A replica of the jobs' database for the READ_REPLICA tests (tests/faces/test_read_replica.py):
    # in a test run Django points it at the test database itself (a mirror of default), through
    # a connection of its own, so the queries a page sends there are captured apart. Only tests
    # that name it in their databases may use it. A test's worker subprocess may be given a
    # replica no connection can open (DJANGO_JOBS_TEST_REPLICA_NAME), to show it never reads it.
    DATABASES["replica"] = {**DATABASES["default"], "TEST": {"MIRROR": "default"}}
    if os.environ.get("DJANGO_JOBS_TEST_REPLICA_NAME"):
        DATABASES["replica"]["NAME"] = os.environ["DJANGO_JOBS_TEST_REPLICA_NAME"]

SECRET_KEY = "tests-only-not-secret"
ALLOWED_HOSTS = ["127.0.0.1"]  # a real server started by a test (tests/engine/test_asgi_enqueue.py)
USE_TZ = True
TIME_ZONE = "UTC"
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_jobs",
    "tests",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
]
ROOT_URLCONF = "tests.urls"
STATIC_URL = "static/"  # live_server's static handler needs one
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ]
        },
    }
]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
DJANGO_JOBS: dict[str, Any] = {"BACKOFF_BASE": 0.01, "BACKOFF_CAP": 0.05, "POLL_INTERVAL": 0.2}

# Completion callbacks: tests run a real receiver on 127.0.0.1.
DJANGO_JOBS.update({
    "CALLBACK_ALLOWED_HOSTS": ["127.0.0.1"],
    "CALLBACK_SECRET": "tests-only-callback-secret",
    "CALLBACK_BACKOFF": [0.01, 0.05],
    "CALLBACK_TIMEOUT": 5.0,
})

# Extra DJANGO_JOBS keys (JSON) for subprocess workers started by one test.
DJANGO_JOBS.update(__import__("json").loads(os.environ.get("DJANGO_JOBS_TEST_EXTRA", "{}")))
# The django.tasks backend: Django 6 ships the framework; on Django 5.2 the django-tasks backport
# provides it (the "tasks" extra). Without either, TASKS is left out and the task tests skip.
HAS_TASKS_FRAMEWORK = bool(find_spec("django.tasks") or find_spec("django_tasks"))
if not find_spec("django.tasks") and HAS_TASKS_FRAMEWORK:
    INSTALLED_APPS.append("django_tasks")
if HAS_TASKS_FRAMEWORK:
    TASKS = {
        "default": {
            "BACKEND": "django_jobs.backends.DatabaseBackend",
            "QUEUES": ["default", "emails"],
        },
    }
