from django.db import migrations

from django_jobs.mariadb import narrow_status_index, widen_status_index


class Migration(migrations.Migration):
    """On MariaDB and MySQL only: the status index covers the overview's counts (mariadb.py)."""

    dependencies = [
        ('django_jobs', '0013_mariadb_admin_indexes'),
    ]

    operations = [
        # Not atomic: MariaDB and MySQL cannot run DDL inside a transaction.
        migrations.RunPython(widen_status_index, narrow_status_index, atomic=False,
                             elidable=False),
    ]
