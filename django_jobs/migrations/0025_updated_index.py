"""The updated index: the failed and dead jobs by status and ``updated_at``, which serves the
API's list with ``since`` (``GET /jobs?status=failed&since=...``).

On PostgreSQL it is a partial index built with ``CREATE INDEX CONCURRENTLY``: the jobs table
is read and written by workers while it builds (it waits for the transactions open on the
table at its start, then for those open when it validates; a failed build leaves an INVALID
index to drop and build again). The migration is not atomic, as ``CONCURRENTLY`` cannot run in
a transaction. On MariaDB and MySQL, which have no partial index, it is a full index, built
online: InnoDB's ``ALGORITHM=INPLACE, LOCK=NONE`` (the default for a secondary index) lets
reads and writes go on while it builds, and takes the table's metadata lock exclusively only
for a moment at the start and the end, so the build waits for the transactions open on the
table, and statements that arrive meanwhile wait behind it. SQLite builds it in place, with
the database locked for the build.
"""

from django.db import migrations, models


class AddIndexOnline(migrations.AddIndex):
    """``AddIndex``, built ``CONCURRENTLY`` on PostgreSQL (as ``django.contrib.postgres``'s
    ``AddIndexConcurrently``, which refuses other databases and needs psycopg installed)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            if schema_editor.connection.vendor == "postgresql":
                schema_editor.add_index(model, self.index, concurrently=True)
            else:
                schema_editor.add_index(model, self.index)

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            if schema_editor.connection.vendor == "postgresql":
                schema_editor.remove_index(model, self.index, concurrently=True)
            else:
                schema_editor.remove_index(model, self.index)


class Migration(migrations.Migration):
    atomic = False  # CREATE INDEX CONCURRENTLY cannot run in a transaction

    dependencies = [
        ("django_jobs", "0024_live_waiters"),
    ]

    operations = [
        AddIndexOnline(
            model_name="job",
            index=models.Index(
                condition=models.Q(("status__in", ["failed", "dead"])),
                fields=["status", "updated_at"],
                name="django_jobs_updated_idx",
            ),
        ),
    ]
