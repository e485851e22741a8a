"""Django's ``flush``, which empties the test database after each transactional test, with
one change on PostgreSQL: it truncates only the tables and partitions that hold rows.

On PostgreSQL the jobs and attempts tables are partitioned by day, some forty partitions each
with their indexes, and a ``TRUNCATE`` of every table rewrites all of them (about half a second
per test). The tables end as Django's flush leaves them: empty, then refilled by
``post_migrate``. A flush that resets sequences is Django's own.
"""

from django.core.management.commands import flush
from django.core.management.sql import emit_post_migrate_signal
from django.db import connections, transaction


class Command(flush.Command):
    def handle(self, **options):
        connection = connections[options["database"]]
        if (connection.vendor != "postgresql" or options["interactive"]
                or options.get("reset_sequences", True)):
            return super().handle(**options)
        tables = connection.introspection.django_table_names(
            only_existing=True, include_views=False)
        if not tables:
            return None
        quote = connection.ops.quote_name
        holding = " UNION ".join(
            f"SELECT tableoid::regclass::text FROM {quote(table)} GROUP BY 1"
            for table in tables)
        with transaction.atomic(using=connection.alias, savepoint=False):
            with connection.cursor() as cursor:
                cursor.execute(holding)
                names = [name for (name,) in cursor.fetchall()]
                if names:
                    cursor.execute(f"TRUNCATE {', '.join(names)} CASCADE")
        if not options.get("inhibit_post_migrate", False):
            emit_post_migrate_signal(options["verbosity"], False, options["database"])
        return None
