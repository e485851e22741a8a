from django.db import migrations

# The MariaDB code is imported when the migration runs, not when the migrations are loaded
# (as every worker's start does on any database).


def add_admin_indexes(apps, schema_editor):
    from django_jobs.engine.mariadb import schema

    schema.add_admin_indexes(apps, schema_editor)


def drop_admin_indexes(apps, schema_editor):
    from django_jobs.engine.mariadb import schema

    schema.drop_admin_indexes(apps, schema_editor)


class Migration(migrations.Migration):
    """On MariaDB and MySQL only: a status index that covers the overview's counts, and type and
    queue indexes for the filtered lists (engine/mariadb/schema.py)."""

    dependencies = [
        ('django_jobs', '0013_mariadb_admin_indexes'),
    ]

    operations = [
        # Not atomic: MariaDB and MySQL cannot run DDL inside a transaction.
        migrations.RunPython(add_admin_indexes, drop_admin_indexes, atomic=False,
                             elidable=False),
    ]
