from django.db import migrations

# The MariaDB code is imported when the migration runs, not when the migrations are loaded
# (as every worker's start does on any database).


def add_updated_index(apps, schema_editor):
    from django_jobs.engine.mariadb import schema

    schema.add_updated_index(apps, schema_editor)


def drop_updated_index(apps, schema_editor):
    from django_jobs.engine.mariadb import schema

    schema.drop_updated_index(apps, schema_editor)


class Migration(migrations.Migration):
    """On MariaDB and MySQL only: the failed and dead jobs by ``updated_at``, through a virtual
    column, for the lists with ``since`` (engine/mariadb/schema.py). The column is added in
    place and the index built online: writes go on while it builds."""

    dependencies = [
        ('django_jobs', '0025_updated_index'),
    ]

    operations = [
        # Not atomic: MariaDB and MySQL cannot run DDL inside a transaction.
        migrations.RunPython(add_updated_index, drop_updated_index, atomic=False,
                             elidable=False),
    ]
