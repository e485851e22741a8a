"""How far a plain enqueue reaches into django_jobs: the modules whose functions run for
``Job.enqueue`` of a job that uses no feature (no unique key, dependency, group, callback or
limit), counted as ``/work/tools/modcount.py`` counts them (``sys.setprofile``, the second of
two enqueues), on the database the suite runs on.

The bound, per database: 8 modules on SQLite and MariaDB, the job, the options and the
engine's lookup (``models.jobs``, ``core.contract``), the checks (``core.validation``,
``core.json_rules``), the database's clock (``core.clock``), the trace context
(``core.tracing``), the instance (``models.instances``) and the enqueue verb (``engine.verbs``),
whose INSERT is Django's ``save()``; 10 on PostgreSQL, whose INSERT is its own statement
(``engine.postgres.enqueue``, ``engine.postgres.cursor``)."""

import sys

import pytest
from django.db import connection

from django_jobs.models import Job

pytestmark = pytest.mark.django_db

BOUND = {"postgresql": 10, "mysql": 8, "sqlite": 8}


def entered(call):
    """The django_jobs modules (not migrations) whose functions run during ``call()``."""
    seen = set()

    def profile(frame, event, arg):
        if event == "call":
            name = frame.f_globals.get("__name__", "")
            if name.startswith("django_jobs") and ".migrations" not in name:
                seen.add(name)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return seen


def test_a_plain_enqueue_runs_functions_of_few_modules_and_of_no_feature():
    Job.enqueue("echo", {"n": 1})  # the first: the engine made, the clock's offset measured
    modules = entered(lambda: Job.enqueue("echo", {"n": 2}))
    assert len(modules) <= BOUND[connection.vendor], sorted(modules)
    assert not [name for name in modules if name.startswith("django_jobs.features")]
    assert "django_jobs.engine.hooks" not in modules  # no feature is even asked


def test_an_enqueue_asks_only_the_features_whose_options_it_sets():
    Job.enqueue("echo", {"n": 1})
    modules = entered(lambda: Job.enqueue("echo", {"n": 2}, unique_key="k"))
    features = {name for name in modules if name.startswith("django_jobs.features")}
    assert {"django_jobs.features.guarded_insert", "django_jobs.features.unique"} <= features
    assert "django_jobs.features.groups" not in features
    assert "django_jobs.features.limits.claim" not in features


def test_a_plain_enqueue_many_asks_no_feature():
    Job.enqueue_many("echo", [{"n": 1}])
    modules = entered(lambda: Job.enqueue_many("echo", [{"n": 2}, {"n": 3}]))
    assert not [name for name in modules if name.startswith("django_jobs.features")]
