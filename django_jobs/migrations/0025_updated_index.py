"""The updated index: the failed and dead jobs by ``updated_at``, which serves the API's list
with ``since`` (``GET /jobs?status=failed&since=...``).

On PostgreSQL it is a partial index built with ``CREATE INDEX CONCURRENTLY``: the jobs table
is read and written by workers while it builds (it waits for the transactions open on the
table at its start, then for those open when it validates; a failed build leaves an INVALID
index to drop and build again). The migration is not atomic, as ``CONCURRENTLY`` cannot run in
a transaction. SQLite builds it in place (partial too), with the database locked for the build.

MariaDB and MySQL do not get it: they have no partial index, and Django would build a full
one, whose entry every claim and every finish would move (each sets ``updated_at``). There the
list with ``since`` reads the status index, as before.
"""

from django.db import migrations, models


def builds_it(schema_editor) -> bool:
    return schema_editor.connection.vendor != "mysql"


class AddIndexOnline(migrations.AddIndex):
    """``AddIndex``, built ``CONCURRENTLY`` on PostgreSQL (as ``django.contrib.postgres``'s
    ``AddIndexConcurrently``, which refuses other databases), and not at all on MariaDB and
    MySQL (the module's docstring says why)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model) and builds_it(
                schema_editor):
            concurrently = schema_editor.connection.vendor == "postgresql"
            schema_editor.add_index(model, self.index, **(
                {"concurrently": True} if concurrently else {}))

    def database_backwards(self, app_label, schema_editor, from_state, to_state):
        model = from_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model) and builds_it(
                schema_editor):
            concurrently = schema_editor.connection.vendor == "postgresql"
            schema_editor.remove_index(model, self.index, **(
                {"concurrently": True} if concurrently else {}))


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
                fields=["updated_at"],
                name="django_jobs_updated_idx",
            ),
        ),
    ]
