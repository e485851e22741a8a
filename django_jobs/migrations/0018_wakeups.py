"""On PostgreSQL, an enqueue wakes as many idle workers as it has ready jobs, not all of them.

A worker whose claim came back short (fewer jobs than it asked for) is registered in
``django_jobs_waiter`` by that claim (``engine/postgres/waiters.py``), keyed by the process id
of the session that listens for it (``engine/postgres/listener.py``). The triggers take, per
queue, as many waiting workers as there are jobs ready (due within a second, by the database's
clock; a job becomes ready when it is inserted, made pending again, or a pending job's run_at
is moved earlier), idle waiters before those holding jobs, oldest first, and send each a
``NOTIFY django_jobs_<pid>``; with
fewer waiters than jobs, the workers woken last make up the difference (they are claiming, or
claim at their next turn), and only with fewer workers than jobs do they send
``NOTIFY django_jobs, '<queue>'``, which every worker of that queue hears. The waiters are
taken with ``FOR UPDATE SKIP LOCKED`` inside the enqueuer's transaction: two enqueues take two
different waiters, and a rolled-back enqueue leaves its waiters waiting.

The table is unlogged: it holds only who waits now, rebuilt by the next claims after a crash.
``django_jobs_wake`` keeps generic plans (``plan_cache_mode``): with the number of jobs a
parameter, PL/pgSQL would otherwise plan its statements again on every call (about 150 µs per
enqueue on the development machine, four times the rest of the trigger).
"""

from django.db import migrations

TABLE = """
CREATE UNLOGGED TABLE IF NOT EXISTS django_jobs_waiter (
    pid integer PRIMARY KEY,
    queues text[] NULL,
    skips text[] NOT NULL DEFAULT '{}',
    waiting timestamptz NULL,
    holding boolean NOT NULL DEFAULT false,
    woken timestamptz NULL
);
"""

# Wake ``n`` workers of queue ``q``: waiting ones first, idle before those that hold jobs
# (with room for more: quick jobs prefetched), oldest first, each taken (its row
# locked until this transaction ends, then no longer waiting); then, without taking them, those
# woken last, which are claiming or claim at their next turn. Only with fewer workers than
# ``n`` (none has a row: workers that do not hear their channel, behind a transaction pooler)
# is every worker of the queue told.
WAKE = """
CREATE OR REPLACE FUNCTION django_jobs_wake(q text, n bigint) RETURNS void AS $$
DECLARE
    taken integer[] := '{}';
    waiter integer;
BEGIN
    FOR waiter IN
        UPDATE django_jobs_waiter SET waiting = NULL, woken = clock_timestamp() WHERE pid IN (
            SELECT pid FROM django_jobs_waiter
            WHERE waiting IS NOT NULL AND (queues IS NULL OR q = ANY(queues))
                AND NOT (q = ANY(skips))
            ORDER BY holding, waiting, pid LIMIT n FOR UPDATE SKIP LOCKED)
        RETURNING pid
    LOOP
        PERFORM pg_notify('django_jobs_' || waiter, q);
        taken := taken || waiter;
    END LOOP;
    IF cardinality(taken) < n THEN
        FOR waiter IN
            SELECT pid FROM django_jobs_waiter
            WHERE (queues IS NULL OR q = ANY(queues)) AND NOT (q = ANY(skips))
                AND pid <> ALL(taken)
            ORDER BY woken DESC NULLS LAST, pid LIMIT n - cardinality(taken)
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

CREATE OR REPLACE FUNCTION django_jobs_wake_inserted() RETURNS trigger AS $$
DECLARE
    ready record;
BEGIN
    FOR ready IN
        SELECT queue, count(*) AS n FROM inserted
        WHERE status = 'pending' AND run_at <= clock_timestamp() + INTERVAL '1 second'
        GROUP BY queue
    LOOP
        PERFORM django_jobs_wake(ready.queue, ready.n);
    END LOOP;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;

CREATE OR REPLACE FUNCTION django_jobs_wake_pending() RETURNS trigger AS $$
BEGIN
    IF NEW.run_at <= clock_timestamp() + INTERVAL '1 second' THEN
        PERFORM django_jobs_wake(NEW.queue, 1);
    END IF;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
"""

TRIGGERS = """
DROP TRIGGER IF EXISTS django_jobs_pending_notify ON django_jobs_job;
DROP TRIGGER IF EXISTS django_jobs_insert_notify ON django_jobs_job;
CREATE TRIGGER django_jobs_insert_notify
    AFTER INSERT ON django_jobs_job REFERENCING NEW TABLE AS inserted
    FOR EACH STATEMENT EXECUTE FUNCTION django_jobs_wake_inserted();
CREATE TRIGGER django_jobs_pending_notify
    AFTER UPDATE OF status, run_at ON django_jobs_job
    FOR EACH ROW WHEN (NEW.status = 'pending'
        AND (OLD.status <> 'pending' OR NEW.run_at < OLD.run_at))
    EXECUTE FUNCTION django_jobs_wake_pending();
"""

# Migration 0002's triggers: every enqueue wakes every worker.
EVERY_WORKER = """
DROP TRIGGER IF EXISTS django_jobs_pending_notify ON django_jobs_job;
DROP TRIGGER IF EXISTS django_jobs_insert_notify ON django_jobs_job;
CREATE TRIGGER django_jobs_insert_notify
    AFTER INSERT ON django_jobs_job
    FOR EACH STATEMENT EXECUTE FUNCTION django_jobs_notify();
CREATE TRIGGER django_jobs_pending_notify
    AFTER UPDATE OF status ON django_jobs_job
    FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status <> 'pending')
    EXECUTE FUNCTION django_jobs_notify();
"""
BACK = EVERY_WORKER + """
DROP FUNCTION IF EXISTS django_jobs_wake_pending();
DROP FUNCTION IF EXISTS django_jobs_wake_inserted();
DROP FUNCTION IF EXISTS django_jobs_wake(text, bigint);
DROP TABLE IF EXISTS django_jobs_waiter;
"""


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(TABLE + WAKE + TRIGGERS)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACK)


class Migration(migrations.Migration):
    dependencies = [("django_jobs", "0017_workflows")]
    operations = [migrations.RunPython(forwards, backwards)]
