"""On PostgreSQL, the jobs and attempts tables become partitioned by range of ``shelf``
(``engine/postgres/partitions.py``, ``docs/explanation-history-partitions.md``); a no-op on
MariaDB, MySQL and SQLite, which keep the plain tables.

No row is copied: each populated table is renamed ``..._open`` and attached to a new parent of
the old name as its first partition, ``FROM (MINVALUE) TO (D)``, ``D`` the day after the largest
prune day it holds (or today, if later), read when the migration runs. Before that, and each
statement its own transaction with ``lock_timeout`` set and tried again on a lock timeout
(``atomic = False``):

1. a trigger on the old table puts a shelf from ``D`` on back to the open shelf (a finish
   while the migration runs stays in the old table, pruned by ``finished_at``); the rows on
   the kept shelf are set back to the open shelf in batches of ids;
2. ``CHECK (shelf < D) NOT VALID`` (``ACCESS EXCLUSIVE``, a catalog change) and its
   ``VALIDATE`` (``SHARE UPDATE EXCLUSIVE``: reads and writes go on), so that the attach
   scans nothing;
3. the unique indexes on ``(id, shelf)``, ``(public_id, shelf)`` and every other unique index
   plus ``shelf``, ``CREATE UNIQUE INDEX CONCURRENTLY`` (an invalid one left by an interrupted
   run is dropped and built again), for the parent's unique indexes to adopt;
4. the foreign keys to jobs and attempts dropped: no foreign key can reference a partitioned
   table on ``id`` alone. Django's model state keeps them (``db_constraint`` unchanged): the
   ORM's ``on_delete`` runs as before, and MariaDB and SQLite keep their constraints and need
   no table rebuilt for this migration;
5. the swap, one transaction (``ACCESS EXCLUSIVE`` for catalog changes only): indexes and
   table renamed, the parent made with the old indexes (a unique one with ``shelf``), the old
   table attached, the kept partition, the triggers moved to the parent, plus one that wakes a
   worker for a dead or canceled job retried out of a day partition (a row moved between
   partitions fires no ``UPDATE`` trigger of the parent);
6. the day partitions from ``D`` on, each made alone and attached (``SHARE UPDATE
   EXCLUSIVE`` on the parent), as the workers' retention makes them later. Until a day is made,
   the last day made (``django_jobs_shelf_days``, ``D - 1`` from step 1 on) sends a finish
   past it to the kept shelf.

``sqlmigrate`` prints the statements with ``<D>`` for the day and ``<day>`` for each day; the index
and trigger statements are read from the table's catalog as it stands.

Steps 1-5 are written out here, as a migration's statements should be. Step 6, the table of
the last day made and the statements' lock timeout and retries come from
``engine/postgres/partitions.py`` on purpose: the day partitions are what the workers' pass
makes ahead and drops every day, and one made here in another way would be a day that pass
does not know. A change to how days are made is a change to that module and its pass, which
then also holds for a site that migrates later.
"""

from datetime import date, timedelta

from django.db import migrations

from django_jobs.core.shelves import KEPT_FROM, OPEN_SHELF
from django_jobs.engine.postgres import partitions as parts

TABLES = parts.TABLES
OPEN = f"'{OPEN_SHELF.isoformat()}'"
KEPT = f"'{KEPT_FROM.isoformat()}'"
BATCH = 10_000

FUNCTIONS = [
    f"CREATE TABLE IF NOT EXISTS {parts.DAYS} (last_day date NOT NULL)",
    # The old table's guard while the migration runs: no shelf at or past D gets in.
    f"""CREATE OR REPLACE FUNCTION django_jobs_shelf_below() RETURNS trigger AS $$
BEGIN
    NEW.shelf := DATE {OPEN};
    RETURN NEW;
END;
$$ LANGUAGE plpgsql""",
    # A dead or canceled job made pending again by a retry moves out of its day partition:
    # no AFTER UPDATE trigger fires for a moved row, so this one wakes a worker, before.
    """CREATE OR REPLACE FUNCTION django_jobs_wake_moved() RETURNS trigger AS $$
BEGIN
    IF NEW.run_at <= clock_timestamp() + INTERVAL '1 second' THEN
        PERFORM django_jobs_wake(NEW.queue, 1);
    END IF;
    RETURN NEW;
END;
$$ LANGUAGE plpgsql""",
]

WAKE_MOVED = (
    "CREATE TRIGGER django_jobs_moved_notify BEFORE UPDATE OF status ON django_jobs_job "
    "FOR EACH ROW WHEN (NEW.status = 'pending' AND OLD.status IN ('dead', 'canceled') "
    f"AND OLD.shelf <> NEW.shelf AND OLD.shelf <> DATE {OPEN}) "
    "EXECUTE FUNCTION django_jobs_wake_moved()")


class Run:
    """Runs statements, each group its own transaction with ``lock_timeout`` and retries; or,
    for ``sqlmigrate``, collects them."""

    def __init__(self, schema_editor):
        self.editor = schema_editor
        self.using = schema_editor.connection.alias
        self.show = schema_editor.collect_sql

    def note(self, text):
        if self.show:
            self.editor.collected_sql.append(f"-- {text}")

    def tx(self, statements, params=None):
        if self.show:
            self.editor.collected_sql.append("BEGIN;")
            self.editor.collected_sql.append(f"SET LOCAL lock_timeout = '{parts.LOCK_TIMEOUT}';")
            self.editor.collected_sql.extend(s + ";" for s in statements)
            self.editor.collected_sql.append("COMMIT;")
        else:
            parts.in_transaction(self.using, statements, params)

    def alone(self, statement):
        if self.show:
            self.editor.collected_sql.append(statement + ";")
        else:
            with self.editor.connection.cursor() as cursor:
                cursor.execute(statement)

    def one(self, sql, params=None):
        with self.editor.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchone()

    def all(self, sql, params=None):
        with self.editor.connection.cursor() as cursor:
            cursor.execute(sql, params)
            return cursor.fetchall()


def with_shelf(definition, name, new_name):
    """A unique index's definition with ``shelf`` last among its columns, named ``new_name``."""
    sql = definition.replace(f"INDEX {name} ", f"INDEX {new_name} ", 1)
    head, _, tail = sql.partition(") ")
    return f"{head}, shelf) {tail}" if tail else f"{sql[:-1]}, shelf)"


def open_name(name):
    """An index's name on the old table once renamed (within PostgreSQL's 63 bytes)."""
    return (name[:58] if len(name) > 58 else name) + "_open"


def side_name(name):
    return (name[:61] if len(name) > 61 else name) + "_s"


def forwards(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    from django_jobs.core.settings import jobs_settings
    from django_jobs.core.shelves import FINISHED, as_age

    run = Run(schema_editor)
    using = run.using
    today = run.one("SELECT (statement_timestamp() AT TIME ZONE 'UTC')::date")[0]
    setting = jobs_settings.RETENTION or {}
    run.tx(FUNCTIONS)
    kind = run.one("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [parts.JOBS])
    if kind is not None and kind[0] == "p":  # done before, up to the day partitions ahead
        if not run.show:
            parts.make_ahead(using, today, [as_age(setting.get(s)) for s in FINISHED])
        return

    # 1. D, and the guard that keeps every shelf below it.
    if run.show:
        day, last = "<D>", "<D - 1>"
        run.note("D: the day after the largest shelf below 9999-01-01 in jobs and attempts, "
                 "or today (UTC) if later; read when the migration runs")
    else:
        largest = max((run.one(f"SELECT max(shelf) FROM {t} WHERE shelf < DATE {KEPT}")[0]  # noqa: S608
                       for t in TABLES), key=lambda d: d or date.min)
        d_day = max(today, largest + timedelta(days=1)) if largest else today
        day, last = d_day.isoformat(), (d_day - timedelta(days=1)).isoformat()
    # The last day made, D - 1 until there are day partitions: a finish past it writes the
    # kept shelf, which the guard puts back to open before the swap and the kept partition
    # holds after it; no write ever needs a partition that is not there yet.
    run.tx([f"DELETE FROM {parts.DAYS}",  # noqa: S608
            f"INSERT INTO {parts.DAYS} (last_day) VALUES ('{last}')"])  # noqa: S608
    for table in TABLES:
        run.tx([f"DROP TRIGGER IF EXISTS django_jobs_shelf_below ON {table}",
                f"CREATE TRIGGER django_jobs_shelf_below BEFORE INSERT OR UPDATE OF shelf ON "
                f"{table} FOR EACH ROW WHEN (NEW.shelf >= DATE '{day}') "
                "EXECUTE FUNCTION django_jobs_shelf_below()"])
    for table in TABLES:
        update = (f"UPDATE {table} SET shelf = DATE {OPEN} WHERE id >= %s AND id < %s "  # noqa: S608
                  f"AND shelf >= DATE '{day}'")
        if run.show:
            run.note(f"in batches of {BATCH} ids, from the least id to the largest:")
            run.tx([update.replace("%s", "<from>", 1).replace("%s", "<to>", 1)])
            continue
        low, high = run.one(f"SELECT min(id), max(id) FROM {table}")  # noqa: S608
        start = low
        while start is not None and start <= high:
            run.tx([update], [start, start + BATCH])
            start += BATCH

    # 2. The check that lets the attach scan nothing.
    for table in TABLES:
        run.tx([f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {table}_below_d",
                f"ALTER TABLE {table} ADD CONSTRAINT {table}_below_d "
                f"CHECK (shelf < DATE '{day}') NOT VALID"])
        run.tx([f"ALTER TABLE {table} VALIDATE CONSTRAINT {table}_below_d"])

    # 3. The unique indexes with shelf, built beside the old ones.
    uniques, plain, triggers = {}, {}, {}
    for table in TABLES:
        found = run.all("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = "
                        "current_schema() AND tablename = %s ORDER BY 1", [table])
        uniques[table] = [(n, d) for n, d in found if "UNIQUE" in d and not n.endswith("_s")]
        plain[table] = [(n, d) for n, d in found if "UNIQUE" not in d]
        triggers[table] = run.all(
            "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = "
            "%s::regclass AND NOT tgisinternal AND tgname <> 'django_jobs_shelf_below' "
            "ORDER BY 1", [table])
        for name, definition in uniques[table]:
            side = side_name(name)
            invalid = run.one("SELECT NOT i.indisvalid FROM pg_index i JOIN pg_class c ON "
                              "c.oid = i.indexrelid WHERE c.relname = %s", [side])
            if invalid is not None and invalid[0]:
                run.alone(f"DROP INDEX CONCURRENTLY IF EXISTS {side}")
            elif invalid is not None and not run.show:
                continue
            if name.endswith("_pkey"):
                sql = f"CREATE UNIQUE INDEX CONCURRENTLY {side} ON {table} (id, shelf)"
            else:
                sql = with_shelf(definition, name, side).replace(
                    "UNIQUE INDEX", "UNIQUE INDEX CONCURRENTLY", 1)
            run.alone(sql)

    # 4. The foreign keys to jobs and attempts.
    fks = run.all("SELECT conrelid::regclass::text, conname FROM pg_constraint WHERE contype = "
                  "'f' AND confrelid IN (%s::regclass, %s::regclass) ORDER BY 1, 2",
                  list(TABLES))
    if fks:
        run.tx([f'ALTER TABLE {t} DROP CONSTRAINT "{c}"' for t, c in fks])

    # 5. The swap.
    swap = []
    for table in TABLES:
        part = f"{table}_open"
        sequence = run.one("SELECT pg_get_serial_sequence(%s, 'id')", [table])[0]
        swap.append(f"DROP TRIGGER IF EXISTS django_jobs_shelf_below ON {table}")
        for name, _ in triggers[table]:
            swap.append(f"DROP TRIGGER {name} ON {table}")
        for name, _ in uniques[table] + plain[table]:
            if not name.endswith("_pkey"):  # the open partition keeps its primary key
                swap.append(f"ALTER INDEX {name} RENAME TO {open_name(name)}")
        swap.append(f"ALTER TABLE {table} RENAME TO {part}")
        swap.append(f"CREATE TABLE {table} (LIKE {part} INCLUDING DEFAULTS) "
                    "PARTITION BY RANGE (shelf)")
        swap.append(f"ALTER TABLE {table} ALTER id SET DEFAULT nextval('{sequence}')")
        for name, definition in uniques[table]:
            if name.endswith("_pkey"):
                swap.append(f"CREATE UNIQUE INDEX {table}_id_shelf ON {table} (id, shelf)")
            else:
                swap.append(with_shelf(definition, name, name))
        for _, definition in plain[table]:
            swap.append(definition)
        swap.append(f"ALTER TABLE {table} ATTACH PARTITION {part} "
                    f"FOR VALUES FROM (MINVALUE) TO ('{day}')")
        swap.append(f"CREATE TABLE {table}_kept PARTITION OF {table} "
                    f"FOR VALUES FROM ({KEPT}) TO (MAXVALUE)")
        swap.append(f"ANALYZE {table}_kept")  # empty, and known to be (partitions.make_day)
        for _, definition in triggers[table]:
            swap.append(definition)
    swap.append(WAKE_MOVED)
    run.tx(swap)
    parts.forget()

    # 6. The day partitions ahead, each made alone and attached (SHARE UPDATE EXCLUSIVE on
    # the parent: claims and finishes go on), the last day made moved up after each.
    if run.show:
        run.note("the day partitions, one per day from D through the longest finite RETENTION "
                 "age + 9 days from today, each its own transaction, the last day made raised "
                 "after each:")
        for table in TABLES:
            run.tx([f"CREATE TABLE IF NOT EXISTS {table}_<day> (LIKE {table} INCLUDING DEFAULTS)",
                    f"ALTER TABLE {table} ATTACH PARTITION {table}_<day> "
                    "FOR VALUES FROM ('<day>') TO ('<day + 1>')",
                    f"ANALYZE {table}_<day>"])
        run.tx([f"UPDATE {parts.DAYS} SET last_day = '<day>' WHERE last_day < '<day>'"])  # noqa: S608
    else:
        parts.make_ahead(using, today, [as_age(setting.get(s)) for s in FINISHED])


def backwards(apps, schema_editor):
    """The plain tables again, in one transaction: the rows of the day and kept partitions
    copied into the old first partition, which takes the tables' names, indexes, triggers and
    foreign keys back (``ACCESS EXCLUSIVE`` while it copies: a downgrade, not an upgrade)."""
    if schema_editor.connection.vendor != "postgresql":
        return
    run = Run(schema_editor)
    kind = run.one("SELECT relkind FROM pg_class WHERE oid = to_regclass(%s)", [parts.JOBS])
    if kind is None or kind[0] != "p":
        return
    triggers = run.all(
        "SELECT tgname, pg_get_triggerdef(oid) FROM pg_trigger WHERE tgrelid = %s::regclass "
        "AND NOT tgisinternal AND tgparentid = 0 AND tgname <> 'django_jobs_moved_notify' "
        "ORDER BY 1", [parts.JOBS])
    statements = []
    for table in TABLES:
        part = f"{table}_open"
        indexes = run.all("SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
                          "AND tablename = %s ORDER BY 1", [part])
        if table == parts.JOBS:
            statements += [f"DROP TRIGGER {name} ON {table}" for name, _ in triggers]
            statements.append(f"DROP TRIGGER django_jobs_moved_notify ON {table}")
        statements += [
            f"ALTER TABLE {table} DETACH PARTITION {part}",
            f"ALTER TABLE {part} DROP CONSTRAINT IF EXISTS {table}_below_d",
            f"INSERT INTO {part} SELECT * FROM {table}",  # noqa: S608
            f"DROP TABLE {table}",
            f"ALTER TABLE {part} RENAME TO {table}",
        ]
        for (name,) in indexes:
            if name.endswith("_s"):
                statements.append(f"DROP INDEX {name}")
            elif name.endswith("_open"):
                statements.append(f"ALTER INDEX {name} RENAME TO {name.removesuffix('_open')}")
        if table == parts.JOBS:
            statements += [definition for _, definition in triggers]
    statements += [f"DROP TABLE IF EXISTS {parts.DAYS}",
                   "DROP FUNCTION IF EXISTS django_jobs_shelf_below()",
                   "DROP FUNCTION IF EXISTS django_jobs_wake_moved()"]
    run.tx(statements)
    # The foreign keys to jobs and attempts that Django's model state holds.
    for model in apps.get_app_config("django_jobs").get_models():
        for field in model._meta.local_fields:
            remote = getattr(field, "remote_field", None)
            if (remote is not None and field.db_constraint
                    and remote.model._meta.db_table in TABLES):
                schema_editor.execute(schema_editor._create_fk_sql(
                    model, field, "_fk_%(to_table)s_%(to_column)s"))
    parts.forget()


class PartitionTables(migrations.RunPython):
    """``forwards``, whose statements ``sqlmigrate`` prints."""

    reduces_to_sql = True

    def describe(self):
        return "Partition the jobs and attempts tables by shelf (PostgreSQL)"


class Migration(migrations.Migration):
    atomic = False

    dependencies = [
        ('django_jobs', '0027_shelf'),
    ]

    operations = [PartitionTables(forwards, backwards, elidable=False)]
