"""On PostgreSQL, an enqueue wakes only waiters whose session is still there, the idle one that
began waiting last first.

A worker killed (SIGKILL, out of memory, the host gone) leaves its row in
``django_jobs_waiter``, waiting: its listener never removed it. Without this migration, the
next enqueue would take that row, oldest first, and notify a channel nobody listens on; the job
then waited for another worker's poll. ``django_jobs_wake`` now takes only rows whose process id
is a live server process (``pg_stat_get_backend_idset``: the server's own list of its sessions,
read once per transaction), so a dead worker's row is passed over from the moment its session
ends. The rows themselves are removed by the workers' heartbeats
(``engine/postgres/waiters.py``, ``forget_gone``). Of the idle waiters, the one that began
waiting last goes first (0018 took the one that waited longest): the likeliest to be still on a
CPU, it starts the job sooner (``benchmarks/wakeups.py``, set-up ``oldest``).
"""

from django.db import migrations

# The rows of live sessions only (see the module's docstring); empty to go back to 0018's.
LIVE = """
                AND pid IN (SELECT pg_stat_get_backend_pid(b)
                    FROM pg_stat_get_backend_idset() AS b)"""

# Which waiter first: idle before holding jobs, then the one that began waiting last (still
# on a CPU, or the latest to leave it), as NEWEST; 0018 took the one that waited longest.
NEWEST = "holding, waiting DESC, pid"
OLDEST = "holding, waiting, pid"

# Migration 0018's function, with LIVE in both of its selections (at ``--LIVE``) and the
# waiters' order at ``--ORDER``.
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
                AND NOT (q = ANY(skips))--LIVE
            ORDER BY --ORDER LIMIT n FOR UPDATE SKIP LOCKED)
        RETURNING pid
    LOOP
        PERFORM pg_notify('django_jobs_' || waiter, q);
        taken := taken || waiter;
    END LOOP;
    IF cardinality(taken) < n THEN
        FOR waiter IN
            SELECT pid FROM django_jobs_waiter
            WHERE (queues IS NULL OR q = ANY(queues)) AND NOT (q = ANY(skips))
                AND pid <> ALL(taken)--LIVE
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
"""


def wake(live: str, order: str) -> str:
    """``django_jobs_wake`` taking the waiters ``live`` admits (LIVE or every row) in ``order``."""
    return WAKE.replace("--LIVE", live).replace("--ORDER", order)


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(wake(LIVE, NEWEST))


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(wake("", OLDEST))


class Migration(migrations.Migration):
    dependencies = [("django_jobs", "0020_stats")]
    operations = [migrations.RunPython(forwards, backwards)]
