"""Test settings with two PostgreSQL databases and one of the two routers of Django's docs
("Multiple databases"), chosen by DJANGO_JOBS_TEST_ROUTER:

- ``replica``: reads to a ``replica`` alias, writes to ``default`` (the primary/replica
  router). The replica is a database of its own with the same tables and no replication, so a
  job written through it is missing from ``default`` and a read through it finds nothing: a
  bug shows instead of hiding behind a mirror. Only the app's reads are sent there: the other
  apps (sessions, users) read where they write, as they would from a replica that replicates.
- ``jobs``: the app on a database of its own (the docs' router by app label): every table of
  django_jobs on a ``jobs`` alias, the other apps on ``default``, which has no jobs tables.

``tests/routed_checks.py`` runs under these settings (``tests/fidelity/test_routers.py`` starts
it), and so do the ``runworker`` processes it starts: each alias names its test database
directly, so a worker opens the databases the test run created.
"""

import os

from tests.settings import *  # noqa: F403
from tests.settings import DATABASES, SUFFIX

ROUTER = os.environ.get("DJANGO_JOBS_TEST_ROUTER", "replica")
SECOND = "replica" if ROUTER == "replica" else "jobs"
APP = "django_jobs"


def _database(name: str) -> dict:
    return {**DATABASES["default"], "NAME": name, "TEST": {"NAME": name}}


DATABASES = {  # noqa: F811
    "default": _database(f"test_django_jobs{SUFFIX}_{ROUTER}_default"),
    SECOND: _database(f"test_django_jobs{SUFFIX}_{ROUTER}_{SECOND}"),
}


class PrimaryReplicaRouter:
    """Django's primary/replica router: reads to the replica, writes to the primary."""

    def db_for_read(self, model, **hints):
        return "replica" if model._meta.app_label == APP else None

    def db_for_write(self, model, **hints):
        return "default"

    def allow_relation(self, obj1, obj2, **hints):
        if obj1._state.db in DATABASES and obj2._state.db in DATABASES:
            return True
        return None

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        return True


class JobsRouter:
    """Django's router by app label: the app's reads and writes, and its tables, on ``jobs``."""

    def db_for_read(self, model, **hints):
        return "jobs" if model._meta.app_label == APP else None

    def db_for_write(self, model, **hints):
        return "jobs" if model._meta.app_label == APP else None

    def allow_relation(self, obj1, obj2, **hints):
        if obj1._meta.app_label == APP or obj2._meta.app_label == APP:
            return True
        return None

    def allow_migrate(self, db, app_label, model_name=None, **hints):
        if app_label == APP:
            return db == "jobs"
        return None


DATABASE_ROUTERS = [PrimaryReplicaRouter() if ROUTER == "replica" else JobsRouter()]
