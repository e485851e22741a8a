"""The horizon's holders that the shared server cannot make: a prepared transaction and a
replication slot, on a throwaway cluster started with ``max_prepared_transactions`` and
``wal_level = logical`` (tests/chaos/cluster.py; never the shared server's settings)."""

import logging
import time

import psycopg
import pytest
from django.db import connections
from django.test import override_settings

from django_jobs.engine.postgres import horizon_holders
from django_jobs.models import Job
from django_jobs.worker.horizon_warning import HorizonWatch
from tests.chaos.cluster import Cluster, throwaway
from tests.conftest import requires_postgres

pytestmark = requires_postgres
ALIAS = "horizon_cluster"
DATABASE = "horizon_jobs"


@pytest.fixture
def cluster():
    with throwaway(DATABASE, max_prepared_transactions=2, wal_level="logical",
                   max_replication_slots=2, max_wal_senders=2) as made:
        yield made


@pytest.fixture
def alias(cluster, django_db_blocker):
    """A Django connection to the cluster's database, as a site's second alias (the test
    database is not needed: nothing but the cluster is read)."""
    settings = dict(connections.settings["default"], NAME=DATABASE, HOST="127.0.0.1",
                    PORT=str(cluster.port), USER="postgres", PASSWORD="")
    connections.settings[ALIAS] = settings
    try:
        with django_db_blocker.unblock():
            yield ALIAS
    finally:
        connections[ALIAS].close()
        del connections[ALIAS]
        del connections.settings[ALIAS]


class JobsOnTheCluster:
    """The app on a database of its own, as in docs/explanation-databases.md."""

    def db_for_read(self, model, **hints):
        return ALIAS if model._meta.app_label == "django_jobs" else None

    db_for_write = db_for_read


def session(cluster: Cluster) -> psycopg.Connection:
    return psycopg.connect(host="127.0.0.1", port=cluster.port, user="postgres",
                           dbname=DATABASE, autocommit=True)


def test_a_prepared_transaction_and_a_slot_are_named_with_their_ages(cluster, alias):
    with session(cluster) as admin:
        admin.execute("CREATE TABLE t (n int)")
        # A new slot waits for running transactions, a prepared one too: the slot first.
        admin.execute("SELECT pg_create_logical_replication_slot('abandoned_slot', "
                      "'test_decoding')")
        admin.execute("BEGIN")
        admin.execute("INSERT INTO t VALUES (1)")
        admin.execute("PREPARE TRANSACTION 'forgotten-batch'")
        for _ in range(3):  # transactions since, so the held xmin has an age
            admin.execute("SELECT txid_current()")
        time.sleep(1.1)
        try:
            found = {h.kind: h for h in horizon_holders.holders(alias)}
            prepared = found["prepared transaction"]
            assert prepared.detail == "forgotten-batch"
            assert prepared.age_seconds is not None and prepared.age_seconds >= 1
            assert prepared.xid_age >= 3
            slot = found["replication slot"]
            assert slot.detail == "abandoned_slot" and slot.state == "inactive"
            assert slot.age_seconds is None and slot.xid_age >= 3
            assert "snapshot" not in found  # the reading session is left out

            # The figures the metrics and the banner show: the prepared transaction is the
            # oldest timed holder; the xid age is the oldest of all.
            figures = horizon_holders.read(alias)
            assert figures is not None and figures.holder is not None
            assert figures.holder.key == prepared.key
            assert figures.age_seconds >= 1
            assert figures.xid_age == max(prepared.xid_age, slot.xid_age)
            assert "prepared transaction 'forgotten-batch', held for" in prepared.describe()
            assert "replication slot 'abandoned_slot' (inactive)" in slot.describe()
        finally:
            admin.execute("ROLLBACK PREPARED 'forgotten-batch'")
            admin.execute("SELECT pg_drop_replication_slot('abandoned_slot')")
        assert horizon_holders.holders(alias) == []


def test_the_worker_warns_of_a_prepared_transaction_and_of_a_slot_it_has_watched(
        cluster, alias, caplog):
    caplog.set_level(logging.INFO, logger="django_jobs.worker")
    events = ("horizon_held", "horizon_clear")

    def lines() -> list[tuple[int, str]]:
        return [(r.levelno, r.getMessage()) for r in caplog.records
                if getattr(r, "event", "") in events]

    watch = HorizonWatch()
    with session(cluster) as admin, \
            override_settings(DJANGO_JOBS={"HORIZON_WARNING_SECONDS": 1},
                              DATABASE_ROUTERS=[JobsOnTheCluster()]):
        assert Job.objects.db == alias  # the worker reads the jobs' database, the cluster
        admin.execute("BEGIN")
        admin.execute("SELECT txid_current()")
        admin.execute("PREPARE TRANSACTION 'forgotten-batch'")
        time.sleep(1.1)
        watch("w1")
        watch("w1")
        [(level, text)] = lines()
        assert level == logging.WARNING and "prepared transaction 'forgotten-batch'" in text
        admin.execute("ROLLBACK PREPARED 'forgotten-batch'")

        admin.execute("SELECT pg_create_logical_replication_slot('abandoned_slot', "
                      "'test_decoding')")
        try:
            watch("w1")  # first seen now: a slot keeps no start time
            assert [level for level, _ in lines()] == [logging.WARNING, logging.INFO]
            time.sleep(1.1)
            watch("w1")
            assert len(lines()) == 3
            level, text = lines()[2]
            assert level == logging.WARNING and "replication slot 'abandoned_slot'" in text
            assert "seen by this worker for" in text
        finally:
            admin.execute("SELECT pg_drop_replication_slot('abandoned_slot')")
