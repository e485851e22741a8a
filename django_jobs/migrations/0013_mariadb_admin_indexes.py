from django.db import migrations

# The MariaDB code is imported when the migration runs, not when the migrations are loaded
# (as every worker's start does on any database).


def order_list_indexes_by_id(apps, schema_editor):
    from django_jobs.engine.mariadb import schema

    schema.order_list_indexes_by_id(apps, schema_editor)


def restore_list_indexes(apps, schema_editor):
    from django_jobs.engine.mariadb import schema

    schema.restore_list_indexes(apps, schema_editor)


class Migration(migrations.Migration):
    """On MariaDB and MySQL only: list indexes that end in ``id``, a ready index (engine/mariadb/schema.py)."""

    dependencies = [
        ('django_jobs', '0012_mariadb_unique_key'),
    ]

    operations = [
        # Not atomic: MariaDB and MySQL cannot run DDL inside a transaction.
        migrations.RunPython(order_list_indexes_by_id, restore_list_indexes, atomic=False,
                             elidable=False),
    ]
