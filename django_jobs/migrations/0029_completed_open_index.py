"""On PostgreSQL's partitioned jobs table, an index of the completed jobs of the open partition
by ``created_at`` (``django_jobs_completed_open``); a no-op elsewhere.

A list of completed jobs, newest first (the admin's ``?status=completed``), is a merge of
every partition's ``created_at`` index. In each day partition completed jobs are most rows,
so its branch finds them at once; the open partition holds the open jobs, up to millions, and
no completed one, and its branch read its whole ``created_at`` index, each entry's row, before
it could say so (a quarter of a second at a million open jobs). This index holds only that
partition's completed jobs: none once the jobs finished before the partitioning are pruned (a
finish moves its row to a day partition), so the branch ends at its first read. Every write
to the open partition tests its predicate and adds no entry.

``CREATE INDEX CONCURRENTLY`` (``SHARE UPDATE EXCLUSIVE`` on the open partition: claims,
finishes and enqueues go on) reads the partition once and waits for the transactions open on
it at its start and at its validation, so a migration run beside a session held open waits
for that session. An invalid index left by an interrupted build is dropped
(``DROP INDEX CONCURRENTLY``) and built again. The migration is not atomic: neither statement
runs in a transaction. A table that is not partitioned gets nothing.
"""

from django.db import migrations

from django_jobs.engine.postgres import partitions as parts

INDEX = "django_jobs_completed_open"
OPEN_PARTITION = f"{parts.JOBS}_open"
CREATE = (f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {INDEX} ON {OPEN_PARTITION} "
          "(created_at DESC) WHERE status = 'completed'")


def has_open_partition(schema_editor) -> bool:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT c.relkind FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid "
                       "WHERE c.oid = to_regclass(%s) AND i.inhparent = to_regclass(%s)",
                       [OPEN_PARTITION, parts.JOBS])
        return cursor.fetchone() is not None


def invalid_index(schema_editor) -> bool:
    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT NOT i.indisvalid FROM pg_index i "
                       "WHERE i.indexrelid = to_regclass(%s)", [INDEX])
        row = cursor.fetchone()
    return bool(row and row[0])


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    if schema_editor.collect_sql:  # sqlmigrate: the statements, whatever the table is
        schema_editor.collected_sql.append(
            f"-- on the partitioned table only; an invalid {INDEX} is dropped first:")
        schema_editor.collected_sql.append(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX};")
        schema_editor.collected_sql.append(CREATE + ";")
        return
    if not has_open_partition(schema_editor):
        return
    if invalid_index(schema_editor):
        schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")
    schema_editor.execute(CREATE)


def backwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {INDEX}")


class IndexCompletedOpen(migrations.RunPython):
    """``forwards``, whose statements ``sqlmigrate`` prints."""

    reduces_to_sql = True

    def describe(self):
        return "Index the open partition's completed jobs by created_at (PostgreSQL)"


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("django_jobs", "0028_partitions"),
    ]

    operations = [IndexCompletedOpen(forwards, backwards, elidable=False)]
