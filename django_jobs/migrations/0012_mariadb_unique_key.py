from django.db import migrations

from django_jobs.engine.mariadb.schema import add_indexes, drop_indexes


class Migration(migrations.Migration):
    """On MariaDB and MySQL only: full indexes in place of the partial ones (django_jobs/engine/mariadb/schema.py)."""

    dependencies = [
        ('django_jobs', '0010_crashes'),
    ]

    operations = [
        # Not atomic: MariaDB and MySQL cannot run DDL inside a transaction.
        migrations.RunPython(add_indexes, drop_indexes, atomic=False, elidable=False),
    ]
