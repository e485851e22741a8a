"""The ``shelf`` column of jobs and attempts (``core/shelves.py``): the day a finished job may
be pruned, the partition key of the partitioned layout of
``docs/explanation-history-partitions.md``.

Added with a constant database default and ``NOT NULL``: PostgreSQL 11+ and MariaDB 10.3+
store the default in the table's definition and rewrite no row (PostgreSQL: one ``ALTER TABLE
... ADD COLUMN`` under ``ACCESS EXCLUSIVE`` for milliseconds; MariaDB: an instant ``ALTER
TABLE`` under an exclusive metadata lock as briefly), so every existing row, finished or not,
reads as open. MariaDB adds a column instantly only to a table with no index on a virtual
column, so on MariaDB and MySQL the jobs table's updated index (migration 0026) is dropped
before and built again after (online), where the ``ADD COLUMN`` would rebuild the table
(``schema.updated_index_set_aside``). On SQLite, which can add a ``NOT NULL`` column with a
constant default in place too, it is the same ``ADD COLUMN``: Django's SQLite editor would
copy the table.
Jobs finished before it keep the open shelf and are pruned by ``finished_at`` as before.
"""

import datetime

from django.db import migrations, models
from django.db.backends.base.schema import BaseDatabaseSchemaEditor


class AddColumnInPlace(migrations.AddField):
    """``AddField`` that adds the column in place: on SQLite as the plain ``ALTER TABLE ...
    ADD COLUMN`` every other database runs (SQLite's editor rebuilds the table for any ``NOT
    NULL`` column, as it cannot drop a default afterwards; a database default stays); on
    MariaDB and MySQL with the jobs table's index of a virtual column set aside."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state):
        if schema_editor.connection.vendor == "mysql" and self.model_name == "job":
            # Imported here: loading the migrations (every worker's start) needs no MariaDB code
            from django_jobs.engine.mariadb.schema import updated_index_set_aside

            with updated_index_set_aside(schema_editor):
                return super().database_forwards(app_label, schema_editor, from_state,
                                                 to_state)
        if schema_editor.connection.vendor != "sqlite":
            return super().database_forwards(app_label, schema_editor, from_state, to_state)
        model = to_state.apps.get_model(app_label, self.model_name)
        if self.allow_migrate_model(schema_editor.connection.alias, model):
            BaseDatabaseSchemaEditor.add_field(
                schema_editor, model, model._meta.get_field(self.name))
        return None


class Migration(migrations.Migration):

    dependencies = [
        ('django_jobs', '0026_mariadb_updated_index'),
    ]

    operations = [
        AddColumnInPlace(
            model_name='job',
            name='shelf',
            field=models.DateField(db_default=datetime.date(1000, 1, 1), default=datetime.date(1000, 1, 1), editable=False),
        ),
        AddColumnInPlace(
            model_name='jobattempt',
            name='shelf',
            field=models.DateField(db_default=datetime.date(1000, 1, 1), default=datetime.date(1000, 1, 1), editable=False),
        ),
    ]
