"""On PostgreSQL, an enqueue tells a waiting worker of its job without writing the worker's row.

``django_jobs_wake`` (migrations 0018 and 0024) marked each waiter it told as taken, an UPDATE
per job, and the worker's next claim marked it waiting again, another: two dead row versions
per job in ``django_jobs_waiter``, which a long transaction keeps from vacuum. Now a worker's
row is written only when its state changes (waiting, busy, its queues; ``MARK`` in
``engine/postgres/waiters.py``), and an enqueue only locks the waiters it tells (``FOR UPDATE
SKIP LOCKED``, no new row version) until it commits: two enqueues at once tell two different
waiters, and one after the other tell the same waiter, the one that began waiting last (idle
before holding jobs), until its claim leaves it busy. The worker claims as many jobs as it was
told of, up to its room; a job told to a worker with no room left is taken by its next turn or
by another waiting worker's look (``waiters.LOOK_AFTER``). With fewer waiters than jobs, the
waiters of live sessions the enqueue did not tell make up the difference, waiting ones first
(another enqueue holds them), then busy ones (they claim at their next turn); with fewer
workers than jobs every worker of the queue is told, as before. The column ``woken`` is no
longer written (the functions of 0018 and 0024, which going backwards restores, write it).
"""

import importlib

from django.db import migrations

previous = importlib.import_module("django_jobs.migrations.0024_live_waiters")

WAKE = """
CREATE OR REPLACE FUNCTION django_jobs_wake(q text, n bigint) RETURNS void AS $$
DECLARE
    taken integer[] := '{}';
    waiter integer;
BEGIN
    FOR waiter IN
        SELECT pid FROM django_jobs_waiter
        WHERE waiting IS NOT NULL AND (queues IS NULL OR q = ANY(queues))
            AND NOT (q = ANY(skips))--LIVE
        ORDER BY holding, waiting DESC, pid LIMIT n FOR UPDATE SKIP LOCKED
    LOOP
        PERFORM pg_notify('django_jobs_' || waiter, q);
        taken := taken || waiter;
    END LOOP;
    IF cardinality(taken) < n THEN
        FOR waiter IN
            SELECT pid FROM django_jobs_waiter
            WHERE (queues IS NULL OR q = ANY(queues)) AND NOT (q = ANY(skips))
                AND pid <> ALL(taken)--LIVE
            ORDER BY waiting DESC NULLS LAST, pid LIMIT n - cardinality(taken)
        LOOP
            PERFORM pg_notify('django_jobs_' || waiter, q);
            taken := taken || waiter;
        END LOOP;
    END IF;
    IF cardinality(taken) < n THEN
        PERFORM pg_notify('django_jobs', q);
    END IF;
END;
$$ LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan;
""".replace("--LIVE", previous.LIVE)


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(WAKE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(previous.wake(previous.LIVE, previous.NEWEST))


class Migration(migrations.Migration):
    dependencies = [("django_jobs", "0031_idempotency_key_outlives_job")]
    operations = [migrations.RunPython(forwards, backwards)]
