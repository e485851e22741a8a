from django.db import migrations

# The MariaDB code is imported when the migration runs, not when the migrations are loaded
# (as every worker's start does on any database).


def add_indexes(apps, schema_editor):
    from django_jobs.engine.mariadb import schema

    schema.add_indexes(apps, schema_editor)


def drop_indexes(apps, schema_editor):
    from django_jobs.engine.mariadb import schema

    schema.drop_indexes(apps, schema_editor)


class Migration(migrations.Migration):
    """On MariaDB and MySQL only: full indexes in place of the partial ones (django_jobs/engine/mariadb/schema.py)."""

    dependencies = [
        ('django_jobs', '0010_crashes'),
    ]

    operations = [
        # Not atomic: MariaDB and MySQL cannot run DDL inside a transaction.
        migrations.RunPython(add_indexes, drop_indexes, atomic=False, elidable=False),
    ]
