from django.db import migrations

from django_jobs.engine.mariadb.schema import add_admin_indexes, drop_admin_indexes


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
