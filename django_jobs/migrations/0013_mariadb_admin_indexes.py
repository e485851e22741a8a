from django.db import migrations

from django_jobs.engine.mariadb.schema import order_list_indexes_by_id, restore_list_indexes


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
