"""The engine per database: its class is chosen once from the connection, and the store's
verbs reach it through ``core/contract.py``."""

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.db import connection

from django_jobs.core import contract
from django_jobs.core.contract import ClaimRequest, JobEngine
from django_jobs.engine import engine_for
from django_jobs.engine.mariadb.engine import MariaDBEngine
from django_jobs.engine.portable import RowLockEngine, WithoutRowLocksEngine
from django_jobs.engine.postgres.engine import PostgresEngine
from django_jobs.models import Job

EXPECTED = {"postgresql": PostgresEngine, "mysql": MariaDBEngine, "sqlite": WithoutRowLocksEngine}


def test_each_database_gets_one_engine_of_its_vendors_class():
    engine = engine_for(connection.alias)
    assert type(engine) is EXPECTED[connection.vendor]
    assert engine_for(connection.alias) is engine
    assert engine.db == connection.alias


@pytest.mark.parametrize("engine_class", [*EXPECTED.values(), RowLockEngine])
def test_every_engine_has_the_verbs_of_the_contract(engine_class):
    assert issubclass(engine_class, JobEngine)

    class WithoutClaim(engine_class):  # an engine lacking a verb is not one
        claim = None

    assert not issubclass(WithoutClaim, JobEngine)


def test_the_store_hands_its_verbs_to_the_engine_the_app_provided():
    assert contract.engine(connection.alias) is engine_for(connection.alias)


def test_without_the_app_the_store_says_how_to_wire_it():
    provided = contract._make_engine
    contract.provide(None)  # type: ignore[arg-type]
    try:
        with pytest.raises(ImproperlyConfigured, match="INSTALLED_APPS"):
            Job.objects.claim(worker_id="w", limit=1, lease_seconds=30)
    finally:
        contract.provide(provided)  # type: ignore[arg-type]


@pytest.mark.django_db(transaction=True)
def test_a_job_goes_through_the_engines_verbs_from_enqueue_to_completed():
    from django.utils import timezone

    from django_jobs.core.outcomes import AttemptOutcome

    job = Job.enqueue("noop", {"n": 1})
    engine = engine_for(Job.objects.db)
    [claimed] = engine.claim(ClaimRequest("w", limit=5, lease_seconds=30))
    assert claimed.pk == job.pk and claimed.status == Job.Status.PROCESSING
    now = timezone.now()
    [written] = engine.finish([AttemptOutcome(claimed, "completed", now, now)])
    assert written.job.status == Job.Status.COMPLETED
    job.refresh_from_db()
    assert job.status == Job.Status.COMPLETED and job.attempts.count() == 1
